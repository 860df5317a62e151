"""The development corpus (issue 12): a generator of really trained runs with measured labels, split into tune and holdout."""
