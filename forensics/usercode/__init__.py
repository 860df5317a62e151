"""Running the user's model, the opt-in that executes user code: re-executing the bad step (`replay`) and the
debugging guides' first questions asked of the run's own model (`probe`), both built on the user-code kit (`kit`:
entry point, config, the starting checkpoint's rule, restore, batches, RNG, device, module stack, threads). The
capture helpers a training script imports stay at `forensics.capture`, the public path users' scripts name."""
