// When an unfinished turn is still running: the one rule the timeline and the catalog share.
//
// Nothing in the store says that the process running a turn is alive: a turn killed mid-stream
// looks like one still streaming. So a turn without its completion is "running" while its newest
// event is less than QUIET_MS old (by the writer's clock, or received live by this page within
// QUIET_MS, so a writer whose clock runs behind still reads as live), and "stalled" (shown as
// "no activity since …", its timer stopped at that event) after that; it is "interrupted" once a
// later turn of the session has started. A new event makes a stalled turn running again.

export const QUIET_MS = 30_000;

/** "running" or "stalled", for an unfinished turn whose newest activity was at `lastActivity`. */
export function openTurnState(lastActivity, now = Date.now()) {
  return lastActivity !== null && now - lastActivity > QUIET_MS ? "stalled" : "running";
}

export const STATUS_LABEL = {
  running: "running",
  stalled: "no activity",
  interrupted: "interrupted",
  completed: "completed",
  aborted: "aborted",
  partial: "partial",
  session: "session events",
  none: "—",
};
