"""The page sync: walk a ``/page`` resource into the mirror, refresh the rest by lookup."""
