"""The store's faces by audience: `aio_X` written by hand, `blocking_X` generated from it."""
