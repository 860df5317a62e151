"""Every table of the DuckDB store, in one place: the contract between ingest, engine, replay and app.

Tables are long, not wide. Steps are the writer's own (DECISIONS.md §2); a point is identified by
its source file and its position in it (§3). Values are DOUBLE, so NaN and ±Inf survive exactly.

    runs            one row per run directory (id = short hash of the resolved path)
    sources         one row per file read: its format, the group its series belong to, how far it was read
    series          one row per (run, group, tag): the name as shown, its normalised role, counts
    scalars         every scalar point: series, step, value, wall_time, the position it came from
    point_counters  the epoch and batch a console line printed beside a point (only points that have them)
    histograms      TensorBoard histograms, bucket limits and counts kept, summary statistics derived
    texts           text summaries (TensorBoard), and console lines that announce an event in words
                    (`ingest.announcements`: a non-finite loss, a resume), as printed
    configs         every config value, flattened to dotted keys, as JSON
    ingest_issues   what was skipped: file, position (byte offset or line), kind, detail
    checkpoints     every checkpoint file found: step, format, layout, size, whether it is finite
    tensor_stats    per-tensor statistics of each checkpoint (parameters, buffers, optimizer state)
    tensor_deltas   per-tensor change between consecutive checkpoints
    checkpoint_values  scalar facts of a checkpoint: learning rates, GradScaler scale, step counters
    batches         saved batches, located by step
    batch_stats     per-tensor statistics of each saved batch, the samples holding NaN/Inf, per-sample norms
    analyses        one row per `forensics analyze` of a run
    findings        the engine's claims, with evidence (JSON) and the rows they used (sources, JSON)
    spikes          spike timesteps of every series
    skipped         detectors that could not run, and why
    watched_runs    runs `forensics watch` found under its roots: why each is a run, how it last looked
    alerts          what `forensics watch` reported: a new or worse finding, a stalled run, a damaged file
    replays         one row per `forensics replay`: the step, its verdict, where the first non-finite value
                    appeared, the culprit samples, and the whole result as JSON
    probes          one row per check of each `forensics probe`: pass / fail / n/a, its summary, the modules or
                    parameters it names, the finding kinds it explains, its evidence (JSON)
    meta            schema_version and other store facts
"""

SCHEMA_VERSION = 9

# How a database of each older version becomes the next one: statements run in order, in one transaction, by
# `ingest.store` when a writer opens it. A version missing here cannot be migrated (the user re-ingests).
MIGRATIONS: dict[int, tuple[str, ...]] = {
    # v1 -> v2: saved batches keep each sample's norm; which samples are outliers is bad_batch's
    # judgement. The stored batches are forgotten, so the next ingest reads them again with their norms.
    1: (
        "ALTER TABLE batch_stats ADD COLUMN sample_norms DOUBLE[]",
        "ALTER TABLE batch_stats DROP COLUMN outlier_samples",
        "ALTER TABLE batch_stats DROP COLUMN outlier_z",
        "DELETE FROM batch_stats",
        "DELETE FROM batches",
        "DELETE FROM sources WHERE format = 'batch'",
    ),
    # v2 -> v3: watched_runs and alerts, new tables only: the CREATE IF NOT EXISTS that runs before
    # any migration makes them.
    2: (),
    # v3 -> v4: replays, a new table only.
    3: (),
    # v4 -> v5: each log source records the version of the reader that parsed it. Sources stored before have
    # none, so the next ingest reads them again with today's readers (a reader fix reaches stored runs).
    4: ("ALTER TABLE sources ADD COLUMN IF NOT EXISTS reader_version INTEGER",),
    # v5 -> v6: each analysis stores its verdict, reason, headline, restriction and read problems, so
    # no face judges again. Older analyses keep NULL there: the app and `forensics runs` ask for a new analysis.
    5: tuple(f"ALTER TABLE analyses ADD COLUMN IF NOT EXISTS {column}" for column in (
        "verdict VARCHAR", "verdict_reason VARCHAR", "headline_id INTEGER", "only_kinds VARCHAR",
        "skip_kinds VARCHAR", "read_problems VARCHAR", "unknown_files VARCHAR")),
    # v6 -> v7: probes, a new table only.
    6: (),
    # v7 -> v8: a run whose ingest stopped half-way (killed, or locked out of the database) is marked,
    # so `runs`, the app and the next ingest know. Runs stored before are taken as complete (NULL).
    7: ("ALTER TABLE runs ADD COLUMN IF NOT EXISTS ingest_complete BOOLEAN",),
    # v8 -> v9: a point's epoch and batch move from `scalars` to `point_counters`, which holds only the
    # points that have them (console lines). Two all-NULL columns cost DuckDB 0.6-0.8 CPU s per 10M appended
    # points (a quarter of the append) for every other format.
    # (The ADD IF NOT EXISTS lets a store made with today's `scalars` and marked older, as tests make them, migrate.)
    8: ("ALTER TABLE scalars ADD COLUMN IF NOT EXISTS epoch BIGINT",
        "ALTER TABLE scalars ADD COLUMN IF NOT EXISTS batch BIGINT",
        "INSERT INTO point_counters (series_id, source_id, position, step, epoch, batch) "
        "SELECT series_id, source_id, position, step, epoch, batch FROM scalars "
        "WHERE epoch IS NOT NULL OR batch IS NOT NULL",
        "ALTER TABLE scalars DROP COLUMN epoch",
        "ALTER TABLE scalars DROP COLUMN batch"),
}

TABLES: dict[str, str] = {
    "meta": """
        CREATE TABLE IF NOT EXISTS meta (
            key VARCHAR PRIMARY KEY,
            value VARCHAR
        )""",
    "runs": """
        CREATE TABLE IF NOT EXISTS runs (
            run_id VARCHAR PRIMARY KEY,     -- short hash of the resolved root path
            name VARCHAR NOT NULL,          -- the folder's name
            root VARCHAR NOT NULL,          -- resolved absolute path
            first_ingested TIMESTAMP,
            last_ingested TIMESTAMP,
            ingest_complete BOOLEAN         -- FALSE from an ingest's first write until its last: still FALSE
                                            -- after one that stopped half-way (killed, locked out); NULL in
                                            -- stores made before schema 8 (taken as complete)
        )""",
    "sources": """
        CREATE TABLE IF NOT EXISTS sources (
            source_id INTEGER PRIMARY KEY,
            run_id VARCHAR NOT NULL,
            path VARCHAR NOT NULL,          -- relative to the run root
            format VARCHAR NOT NULL,        -- tensorboard, wandb, hf_trainer_state, lightning_csv, mlflow, csv,
                                            -- jsonl, parquet, wandb_export, console, config, checkpoint, batch
            grp VARCHAR NOT NULL,           -- the group its series belong to (TensorBoard sub-folder, W&B run, ...)
            rank INTEGER,                   -- process rank, where the name or content gives it
            size_bytes BIGINT,
            mtime DOUBLE,
            head_hash VARCHAR,              -- hash of the first bytes: a rewritten file is read anew
            resume_at BIGINT DEFAULT 0,     -- where the next ingest goes on (byte offset or record index)
            reader_version INTEGER,         -- formats.Format.version of the reader that parsed it: another
                                            -- version (or none) reads the file anew, its old points forgotten
            n_points BIGINT DEFAULT 0,
            duplicate_points BIGINT DEFAULT 0,  -- points dropped as exact copies of another source (§3)
            status VARCHAR,                 -- ok, partial, unreadable, duplicate
            detail VARCHAR,
            UNIQUE (run_id, path)
        )""",
    "series": """
        CREATE TABLE IF NOT EXISTS series (
            series_id INTEGER PRIMARY KEY,
            run_id VARCHAR NOT NULL,
            grp VARCHAR NOT NULL,
            tag VARCHAR NOT NULL,           -- the writer's spelling
            format VARCHAR NOT NULL,        -- format of the source that first held it
            name VARCHAR NOT NULL,          -- as a user would name it: grp/tag for TensorBoard sub-folders
            role VARCHAR NOT NULL,          -- train_loss, val_loss, accuracy, val_accuracy, grad_norm,
                                            -- layer_grad_norm, weight_norm, layer_weight_norm, lr, loss_scale,
                                            -- memory, throughput, step_time, epoch, other
            split VARCHAR,                  -- train, val, test, or NULL
            layer VARCHAR,                  -- for per-layer roles, the layer's name
            canonical BOOLEAN DEFAULT FALSE,-- the main series of its role (`loss`, not `recon_loss`)
            ordinal BOOLEAN DEFAULT FALSE,  -- steps are the record's ordinal, not a logged step (§2)
            n_points BIGINT DEFAULT 0,
            n_nonfinite BIGINT DEFAULT 0,
            first_step BIGINT,
            last_step BIGINT,
            UNIQUE (run_id, grp, tag)
        )""",
    "scalars": """
        CREATE TABLE IF NOT EXISTS scalars (
            series_id INTEGER NOT NULL,     -- the run is the series' run (no run_id here: it would cost a
                                            -- third of the bulk-insert time on 10M-point files)
            source_id INTEGER NOT NULL,
            position BIGINT NOT NULL,       -- byte offset of the record, or line / entry index
            step BIGINT NOT NULL,
            value DOUBLE,                   -- exactly as logged: NaN and ±Inf kept
            wall_time DOUBLE                -- seconds since the epoch, where the writer gives it
        )""",
    "point_counters": """
        CREATE TABLE IF NOT EXISTS point_counters (
            -- The counters a console line printed beside its points (DECISIONS.md §2), one row per point of
            -- `scalars` that has an epoch or a batch, keyed as that point; the other points have no row. Apart
            -- from `scalars` because two mostly-NULL columns there cost every 10M-point append 0.6-0.8 CPU s.
            series_id INTEGER NOT NULL,
            source_id INTEGER NOT NULL,
            position BIGINT NOT NULL,
            step BIGINT NOT NULL,
            epoch BIGINT,
            batch BIGINT
        )""",
    "histograms": """
        CREATE TABLE IF NOT EXISTS histograms (
            series_id INTEGER NOT NULL,
            source_id INTEGER NOT NULL,
            position BIGINT NOT NULL,
            step BIGINT NOT NULL,
            wall_time DOUBLE,
            bucket_limits DOUBLE[],         -- right edges, as the writer stored them
            bucket_counts DOUBLE[],
            min DOUBLE, max DOUBLE, num DOUBLE, sum DOUBLE, sum_squares DOUBLE,
            mean DOUBLE, std DOUBLE,
            zero_fraction DOUBLE            -- mass of the bucket holding 0, over num
        )""",
    "texts": """
        CREATE TABLE IF NOT EXISTS texts (
            run_id VARCHAR NOT NULL,
            source_id INTEGER NOT NULL,
            position BIGINT NOT NULL,
            tag VARCHAR NOT NULL,
            step BIGINT,
            wall_time DOUBLE,
            text VARCHAR
        )""",
    "configs": """
        CREATE TABLE IF NOT EXISTS configs (
            run_id VARCHAR NOT NULL,
            source_id INTEGER NOT NULL,
            name VARCHAR NOT NULL,          -- which document: config.yaml, hparams.yaml, wandb, hparams, ...
            key VARCHAR NOT NULL,           -- dotted path, e.g. optimizer.lr
            value VARCHAR,                  -- JSON
            value_num DOUBLE                -- the value when it is a number, for quick queries
        )""",
    "ingest_issues": """
        CREATE TABLE IF NOT EXISTS ingest_issues (
            run_id VARCHAR NOT NULL,
            ingest_time TIMESTAMP NOT NULL,
            path VARCHAR NOT NULL,
            position BIGINT,                -- byte offset or line number; NULL for a whole file
            kind VARCHAR NOT NULL,          -- truncated, crc_mismatch, empty, not_this_format, garbled,
                                            -- unknown_file, unmatched_line, needs_pickle, ...
            detail VARCHAR
        )""",
    "checkpoints": """
        CREATE TABLE IF NOT EXISTS checkpoints (
            ckpt_id INTEGER PRIMARY KEY,
            run_id VARCHAR NOT NULL,
            path VARCHAR NOT NULL,          -- relative to the run root (a folder for HF layouts)
            step BIGINT,                    -- from contents first, then from the name
            step_from VARCHAR,              -- contents, name, or NULL
            format VARCHAR NOT NULL,        -- safetensors, torch, lightning, hf
            size_bytes BIGINT,
            n_tensors INTEGER,
            n_nonfinite BIGINT,             -- NaN + Inf elements across model tensors
            finite BOOLEAN,
            has_optimizer BOOLEAN,
            has_scaler BOOLEAN,
            has_rng BOOLEAN,
            status VARCHAR,                 -- ok, partial, unreadable, needs_pickle
            detail VARCHAR,
            UNIQUE (run_id, path)
        )""",
    "tensor_stats": """
        CREATE TABLE IF NOT EXISTS tensor_stats (
            run_id VARCHAR NOT NULL,
            ckpt_id INTEGER NOT NULL,
            step BIGINT,
            file VARCHAR,                   -- the file inside the checkpoint that holds it
            tensor VARCHAR NOT NULL,        -- parameter name, or e.g. optimizer.state.3.exp_avg
            kind VARCHAR NOT NULL,          -- param, buffer, optimizer, scaler, other
            param VARCHAR,                  -- the model parameter it belongs to, wrapper prefixes (`_orig_mod.`,
                                            -- `module.`, Lightning's `model.`) stripped: deltas match on it;
                                            -- for optimizer state only where the mapping is certain
            dtype VARCHAR,
            shape BIGINT[],
            numel BIGINT,
            l2 DOUBLE, mean DOUBLE, std DOUBLE, abs_max DOUBLE, min DOUBLE, max DOUBLE,
            zero_fraction DOUBLE,
            n_nan BIGINT, n_inf BIGINT
        )""",
    "tensor_deltas": """
        CREATE TABLE IF NOT EXISTS tensor_deltas (
            run_id VARCHAR NOT NULL,
            ckpt_id INTEGER NOT NULL,
            prev_ckpt_id INTEGER NOT NULL,
            tensor VARCHAR NOT NULL,        -- as found in the newer checkpoint: joins tensor_stats on
                                            -- (ckpt_id, tensor); matched across checkpoints by `param`
            step BIGINT,
            prev_step BIGINT,
            step_distance BIGINT,
            delta_l2 DOUBLE,                -- ‖w_t − w_prev‖
            ratio DOUBLE                    -- ‖Δw‖ / ‖w_prev‖
        )""",
    "checkpoint_values": """
        CREATE TABLE IF NOT EXISTS checkpoint_values (
            run_id VARCHAR NOT NULL,
            ckpt_id INTEGER NOT NULL,
            step BIGINT,
            key VARCHAR NOT NULL,           -- e.g. optimizer.param_groups.0.lr, scaler.scale, global_step
            value DOUBLE
        )""",
    "batches": """
        CREATE TABLE IF NOT EXISTS batches (
            batch_id INTEGER PRIMARY KEY,
            run_id VARCHAR NOT NULL,
            path VARCHAR NOT NULL,
            step BIGINT,                    -- the logged step the batch was used at
            format VARCHAR NOT NULL,        -- torch or safetensors
            n_samples BIGINT,
            n_nonfinite BIGINT,
            status VARCHAR,
            detail VARCHAR,
            UNIQUE (run_id, path)
        )""",
    "batch_stats": """
        CREATE TABLE IF NOT EXISTS batch_stats (
            run_id VARCHAR NOT NULL,
            batch_id INTEGER NOT NULL,
            step BIGINT,
            tensor VARCHAR NOT NULL,
            dtype VARCHAR,
            shape BIGINT[],
            l2 DOUBLE, mean DOUBLE, std DOUBLE, abs_max DOUBLE, min DOUBLE, max DOUBLE,
            n_nan BIGINT, n_inf BIGINT,
            nonfinite_samples BIGINT[],     -- sample indices holding NaN or Inf
            sample_norms DOUBLE[]           -- each sample's L2 norm over its finite entries (floating tensors)
        )""",
    "analyses": """
        CREATE TABLE IF NOT EXISTS analyses (
            analysis_id INTEGER PRIMARY KEY,
            run_id VARCHAR NOT NULL,
            created TIMESTAMP NOT NULL,
            engine_version VARCHAR,
            settings VARCHAR,               -- JSON of detector overrides
            healthy BOOLEAN,                -- verdict = 'healthy'
            verdict VARCHAR,                -- failed, suspicious, inconclusive, healthy (forensics/judge/verdict.py)
            verdict_reason VARCHAR,         -- one line, in the user's terms
            headline_id INTEGER,            -- the finding_id of the earliest cause (the report's headline)
            only_kinds VARCHAR,             -- JSON list: `--only` (empty: every detector)
            skip_kinds VARCHAR,             -- JSON list: `--skip`
            read_problems VARCHAR,          -- JSON list of {path, position, kind, detail, kept, format}
            unknown_files VARCHAR           -- JSON list of files no reader knows
        )""",
    "findings": """
        CREATE TABLE IF NOT EXISTS findings (
            analysis_id INTEGER NOT NULL,
            run_id VARCHAR NOT NULL,
            finding_id INTEGER NOT NULL,    -- order within the analysis: by step, then severity
            kind VARCHAR NOT NULL,          -- a CATALOG.md id
            severity VARCHAR NOT NULL,      -- critical, warning, info
            step BIGINT,
            step_end BIGINT,
            series VARCHAR,
            summary VARCHAR NOT NULL,
            evidence VARCHAR,               -- JSON object of plain values
            causes VARCHAR,                 -- JSON list
            checks VARCHAR,                 -- JSON list
            sources VARCHAR,                -- JSON list of the rows used: {table, series/tag, step range, path}
            event_id INTEGER                -- findings of one event share it (DECISIONS.md §8)
        )""",
    "spikes": """
        CREATE TABLE IF NOT EXISTS spikes (
            analysis_id INTEGER NOT NULL,
            run_id VARCHAR NOT NULL,
            series VARCHAR NOT NULL,
            step BIGINT NOT NULL,
            value DOUBLE,
            baseline DOUBLE,
            z DOUBLE,
            event_id INTEGER
        )""",
    "skipped": """
        CREATE TABLE IF NOT EXISTS skipped (
            analysis_id INTEGER NOT NULL,
            run_id VARCHAR NOT NULL,
            kind VARCHAR NOT NULL,
            reason VARCHAR NOT NULL
        )""",
    # -- watch (docs/watch.md) ----------------------------------------------------------------------------
    "watched_runs": """
        CREATE TABLE IF NOT EXISTS watched_runs (
            run_id VARCHAR PRIMARY KEY,     -- the id ingest gives the run's folder
            path VARCHAR NOT NULL,          -- resolved absolute path of the run's folder
            watch_root VARCHAR NOT NULL,    -- the ROOT it was found under
            kind VARCHAR NOT NULL,          -- the discovery rule: tensorboard_logdir_run, wandb_run, ...
            reason VARCHAR NOT NULL,        -- why it is a run, in words
            first_seen TIMESTAMP,
            last_checked TIMESTAMP,
            last_growth DOUBLE,             -- newest mtime of its files, seconds since the epoch
            fingerprint VARCHAR,            -- hash of every file's (path, size, mtime): unchanged = nothing to do
            n_files BIGINT,
            n_bytes BIGINT,
            state VARCHAR,                  -- active, stalled, gone, error
            detail VARCHAR                  -- the error of the last pass, if any
        )""",
    "alerts": """
        CREATE TABLE IF NOT EXISTS alerts (
            alert_id INTEGER PRIMARY KEY,
            created TIMESTAMP NOT NULL,
            run_id VARCHAR NOT NULL,
            run_name VARCHAR NOT NULL,
            origin VARCHAR NOT NULL,        -- finding (a detector's claim) or watch (the service's own)
            kind VARCHAR NOT NULL,          -- a CATALOG.md id for findings; stalled, truncated, unreadable,
                                            -- deleted, inconclusive for the service's own
            severity VARCHAR NOT NULL,      -- critical, warning, info
            step BIGINT,
            analysis_id INTEGER,            -- the analysis holding the finding
            message VARCHAR NOT NULL,       -- the line printed
            detail VARCHAR                  -- JSON: the finding's evidence, the stall's numbers, the issue
        )""",
    # -- replay (docs/replay.md) ---------------------------------------------------------------------------
    "replays": """
        CREATE TABLE IF NOT EXISTS replays (
            replay_id INTEGER PRIMARY KEY,
            run_id VARCHAR NOT NULL,
            created TIMESTAMP NOT NULL,
            step BIGINT NOT NULL,           -- the step asked for (logged numbering)
            bad_step BIGINT,                -- the first replayed step with a non-finite value (may precede `step`)
            from_checkpoint VARCHAR,        -- relative to the run root
            entry VARCHAR,                  -- the entry point file that was run
            device VARCHAR,
            faithful BOOLEAN,               -- replayed losses and grad norms match the logged ones
            reproduced BOOLEAN,             -- the failure recurs, with equal numbers, in a second re-run
            status VARCHAR,                 -- diagnosed / unfaithful / not reproduced, with the reason
            phase VARCHAR,                  -- forward, backward, optimizer (NULL: no diagnosis)
            op VARCHAR,
            module VARCHAR,
            file VARCHAR,
            line INTEGER,
            culprit_samples BIGINT[],
            result VARCHAR                  -- the full JSON object `forensics replay --json` prints
        )""",
    # -- probe (docs/probe.md) -----------------------------------------------------------------------------
    "probes": """
        CREATE TABLE IF NOT EXISTS probes (
            probe_id INTEGER NOT NULL,      -- one `forensics probe` invocation; its checks share it
            run_id VARCHAR NOT NULL,
            created TIMESTAMP NOT NULL,
            position INTEGER NOT NULL,      -- the check's place in the output
            check_name VARCHAR NOT NULL,    -- overfit_one_batch, lr_range, gradient_flow, ...
            status VARCHAR NOT NULL,        -- pass, fail, n/a
            summary VARCHAR NOT NULL,       -- the sentence printed, numbers in it
            names VARCHAR[],                -- the modules, parameters or batch keys it names
            explains VARCHAR[],             -- the finding kinds (CATALOG.md) it explains
            evidence VARCHAR,               -- JSON: the check's numbers
            from_checkpoint VARCHAR,        -- JSON: the earliest and last checkpoints used
            entry VARCHAR,                  -- the entry point file that was run
            device VARCHAR,
            seconds DOUBLE,                 -- the check's wall time
            PRIMARY KEY (probe_id, position)
        )""",
}

SEQUENCES = ("source_id_seq", "series_id_seq", "ckpt_id_seq", "batch_id_seq", "analysis_id_seq", "alert_id_seq",
             "replay_id_seq", "probe_id_seq")

# No index on the point tables: an ART index slows bulk inserts many times over, and DuckDB's
# per-row-group min/max (zonemaps) already prune scans by run and series.
