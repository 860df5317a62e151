"""Running the user's model, the opt-in that executes user code: re-executing the bad step (`replay`) and the
debugging guides' first questions asked of the run's own model (`probe`). The capture helpers a training script
imports stay at `forensics.capture`, the public path users' scripts name."""
