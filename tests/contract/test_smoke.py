"""A first contract check that the fixtures and both faces work."""

from turnstore import (
    Checkpoint,
)


async def test_save_then_load_returns_the_saved_checkpoint(store):
    """save then load returns an identical checkpoint."""
    checkpoint = Checkpoint.empty("session")
    checkpoint.context.append({"role": "user", "content": "hello"})
    await store.save(checkpoint, [{"role": "user", "content": "hello"}])
    assert await store.load("session") == checkpoint
