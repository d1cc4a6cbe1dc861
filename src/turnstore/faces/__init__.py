"""Internal: the store's faces by audience: `aio_X` written by hand, `blocking_X` generated from it.

The public names are exported by `turnstore` (and `turnstore.seam`)."""
