"""The error tree shared by every layer (ingest is the lowest, so all can raise these).

    ForensicsError                 anything this tool reports as one line and exit code 2
    ├── IngestError                a run could not be read
    │   └── UnreadableRun          nothing in the run directory could be read
    ├── SchemaError                the database has a schema this version cannot use
    ├── StoreLocked                another process holds the database for writing
    ├── StoreUnwritable            a write to the database failed (disk full, read-only folder); rolled back
    ├── MissingDependency          an optional reader's package (or a compiled core) is not installed
    └── ReplayError                `forensics replay` could not re-execute the step
        ├── CheckpointMismatch     no finite checkpoint before the step, or one that does not fit the model
        ├── MissingBatch           a step to re-execute has no saved batch
        └── EntryPointError        no entry point (a template is offered), or it does not import

A checkpoint that needs full unpickling is not an error: it is stored with status `needs_pickle` and read
only with --trust-pickle. Only `forensics.cli` catches `ForensicsError`. Nothing catches bare `Exception`.
"""


class ForensicsError(Exception):
    """Base of every error this tool reports to the user as one line."""


class IngestError(ForensicsError):
    """A run, or a file named explicitly, could not be read."""


class UnreadableRun(IngestError):
    """Nothing in the run directory could be read."""


class SchemaError(ForensicsError):
    """The database was written by a schema version this code cannot use."""


class StoreLocked(ForensicsError):
    """Another process holds the database for writing, and retrying did not help."""


class StoreUnwritable(ForensicsError):
    """A write transaction failed for the database's own file (no space left, a read-only folder, a file size
    limit); DuckDB rolled it back, so the store holds what it held before."""


class MissingDependency(ForensicsError):
    """An optional reader's package is missing; the message names the install command."""


class ReplayError(ForensicsError):
    """`forensics replay` could not re-execute the step: a missing ingredient or an unusable one."""


class CheckpointMismatch(ReplayError):
    """No usable checkpoint: none finite before the step, unreadable, or not fitting the entry point's model."""


class MissingBatch(ReplayError):
    """A step to re-execute has no saved batch."""


class EntryPointError(ReplayError):
    """The entry point is missing or does not import; `template` holds a fill-in file when it is missing."""

    def __init__(self, message: str, template: str | None = None):
        super().__init__(message)
        self.template = template
