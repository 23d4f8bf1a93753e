"""The compare room: column classes, digests, and the oracle. It knows nothing of runs."""
