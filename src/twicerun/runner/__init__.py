"""The runner room: the loop, containment, and (later) the bisect and the amplifiers."""
