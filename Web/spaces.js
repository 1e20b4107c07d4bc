// Shared spaces (protocol 2, docs/protocol.md "Spaces") as the page shows and manages them: the
// requests of the spaces API (through Auth.request) and the small rules the page draws with
// (labels, what a role may do, a join link's secret). No DOM here: Web/app.js draws, and
// Tests/web/spaces.test.mjs tests the pure part.

/** The roles, highest first. */
export const ROLES = ["owner", "admin", "editor", "viewer"];

/** What the page calls a role. */
const ROLE_NAMES = { owner: "owner", admin: "admin", editor: "editor", viewer: "viewer (read-only)" };

/** Whether `role` may write records (editor and above). */
export function canWrite(role) {
  return role === "owner" || role === "admin" || role === "editor";
}

/** Whether `role` may invite, make links and remove members (admin and owner). */
export function canShare(role) {
  return role === "owner" || role === "admin";
}

/** Whether a member of `role` may remove a member of `theirs` (docs/protocol.md's table). */
export function canRemove(role, theirs) {
  if (theirs === "owner") return false;
  if (role === "owner") return true;
  return role === "admin" && (theirs === "editor" || theirs === "viewer");
}

/** A space's label in the sidebar: its name and the user's role ("Trip · editor"). */
export function spaceLabel(space) {
  if (!space || space.personal) return "Personal";
  return `${space.name} · ${ROLE_NAMES[space.role] || space.role}`;
}

/** The secret of a join link's fragment ("#join=SECRET"), or null. */
export function joinSecret(hash) {
  const m = /^#?join=([A-Za-z0-9_\-.~%]+)$/.exec(hash || "");
  if (!m) return null;
  try {
    return decodeURIComponent(m[1]);
  } catch {
    return null;
  }
}

/**
 * The shared spaces of a list as the server sends it (welcome, `spaces`, GET /v1/spaces): the
 * well-formed ones, by name.
 */
export function sharedSpaces(list) {
  return (Array.isArray(list) ? list : [])
    .filter((s) => s && typeof s === "object" && !s.personal && typeof s.id === "string" && s.id && typeof s.name === "string")
    .sort((a, b) => a.name.localeCompare(b.name) || (a.id < b.id ? -1 : 1));
}

/** The newest revision's author (revisions are listed oldest first), or null. */
export function latestAuthor(revisions) {
  if (!Array.isArray(revisions)) return null;
  let newest = null;
  for (const rev of revisions) {
    if (!rev || rev.conflict || typeof rev.author !== "string") continue;
    if (!newest || rev.rev > newest.rev) newest = rev;
  }
  return newest ? newest.author : null;
}

/** A refusal of a spaces request: the server's message (`code` its error code). */
export class SpaceError extends Error {
  constructor(message, { code = null, status = 0 } = {}) {
    super(message);
    this.code = code;
    this.status = status;
  }
}

async function call(auth, method, path, body) {
  let answer;
  try {
    answer = await auth.request(method, path, body);
  } catch (error) {
    if (error instanceof TypeError) throw new SpaceError("the server could not be reached; check the connection", { code: "offline" });
    throw error;
  }
  if (answer.ok) return answer.body;
  const said = answer.body || {};
  throw new SpaceError(said.message || said.error || `the server answered ${answer.status}`, { code: said.error || null, status: answer.status });
}

const at = (id) => `/v1/spaces/${encodeURIComponent(id)}`;

/** GET /v1/spaces: `{ spaces, invitations }`. */
export async function fetchSpaces(auth) {
  const body = await call(auth, "GET", "/v1/spaces");
  return { spaces: (body && body.spaces) || [], invitations: (body && body.invitations) || [] };
}

/** A new shared space named `name`: the Space. */
export function createSpace(auth, name) {
  return call(auth, "POST", "/v1/spaces", { name });
}

/** A space's details: members, and for admins invitations and links. */
export function spaceDetails(auth, id) {
  return call(auth, "GET", at(id));
}

export function acceptInvitation(auth, id) {
  return call(auth, "POST", `${at(id)}/accept`);
}

export function declineInvitation(auth, id) {
  return call(auth, "POST", `${at(id)}/decline`);
}

export function invite(auth, id, username, role) {
  return call(auth, "POST", `${at(id)}/invitations`, { username, role });
}

/** A new link (`role` editor or viewer): the Link with its `url`, shown this once. */
export function createLink(auth, id, role) {
  return call(auth, "POST", `${at(id)}/links`, { role });
}

export function removeMember(auth, id, user) {
  return call(auth, "DELETE", `${at(id)}/members/${encodeURIComponent(user)}`);
}

export function leaveSpace(auth, id) {
  return call(auth, "POST", `${at(id)}/leave`);
}

/** POST /v1/join: `{ space, name, role }`. */
export function joinSpace(auth, secret) {
  return call(auth, "POST", "/v1/join", { secret });
}

/** The revisions of a note of shared space `space` (GET …/revisions?space=). */
export async function revisionsOf(auth, id, space) {
  const body = await call(auth, "GET", `/v1/records/notes/${encodeURIComponent(id)}/revisions${space ? `?space=${encodeURIComponent(space)}` : ""}`);
  return (body && body.revisions) || [];
}
