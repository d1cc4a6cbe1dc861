// The viewer's reads of the JSON API: same origin, authenticated by the server's cookie.

export class ApiError extends Error {
  constructor(status, type, message, didYouMean = []) {
    super(message);
    this.status = status;
    this.type = type;
    // For a session not found: the framework sessions stored under that bare id.
    this.didYouMean = didYouMean;
  }
}

/** GET `path` with `params` (empty values left out) and return the decoded JSON body. */
export async function getJson(path, params = {}, { signal } = {}) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") query.set(key, String(value));
  }
  const url = query.size ? `${path}?${query}` : path;
  let response;
  try {
    response = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin", signal });
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, "NetworkError", "The server did not answer.");
  }
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  if (!response.ok) {
    const type = body && typeof body.type === "string" ? body.type : `HTTP ${response.status}`;
    const message = body && typeof body.error === "string" ? body.error : response.statusText;
    const meant = body && Array.isArray(body.did_you_mean) ? body.did_you_mean.filter((id) => typeof id === "string") : [];
    throw new ApiError(response.status, type, message || `HTTP ${response.status}`, meant);
  }
  if (body === null || typeof body !== "object") {
    throw new ApiError(response.status, "BadResponse", "The server answered with something that is not JSON.");
  }
  return body;
}

/** The API path of one session, with its id percent-encoded as one path segment. */
export function sessionPath(sessionId, tail = "") {
  return `/api/sessions/${encodeURIComponent(sessionId)}${tail}`;
}
