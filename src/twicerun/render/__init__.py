"""The render room: text and tables made from a Result document and nothing else."""
