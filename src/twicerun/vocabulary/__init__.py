"""The words twicerun prints, one module per question they answer, never mixed.

- `loop`: what repeated runs of a step measured (statuses).
- `gate`: how a step on a pull request compares with the committed baseline.

Like `errors`, this package is a leaf every room may import: it holds words, no
behaviour, so a renderer and the code that decided agree on spelling.
"""
