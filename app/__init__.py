"""The Streamlit app: browse what the store holds (runs, findings, curves, checkpoints, replays); computes nothing."""
