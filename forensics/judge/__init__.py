"""The judgement: a run's series as the engine reads them (`run`), the statistics (`stats`, `curves`), one detector per
pathology (`detectors/`), the engine that runs them (`engine`, `settings`), the verdict (`verdict`) and the findings
it stores (`findings`, `catalog`, `numbers` for how a finding writes a number). Nothing here prints or runs user code."""
