"""The judge room: policies, the derived bound, causes and statuses. It reads findings and
writes nothing back to them."""
