"""The github room: the baseline and the gate, the sticky PR comment, annotations, the job
summary and step outputs. It reads Results and renders with the shared renderer."""
