"""The user-code kit: what replay and probe both need to run the user's model, one home for each.

    entry        the entry point (`forensics_entry.py`, DECISIONS.md §10), the run's config, the step's options
    template     the fill-in entry point printed for a run that has none
    checkpoints  the one rule that chooses the checkpoint a replay or a probe starts from (no torch: `analyze`
                 names the replay start with it)
    restore      model, optimizer, scheduler and scaler rebuilt by the entry point, a checkpoint's states loaded
    batches      saved batches (untrusted: `weights_only=True`, safetensors)
    rng          the process's RNG states, read and set
    device       the device to run on (`auto`: CUDA when present)
    modules      the stack of running modules, from forward hooks
    threads      torch's intra-op thread count, saved, set and given back

Importing the kit (and its entry, template, checkpoints, device and threads modules) imports no torch.
"""
