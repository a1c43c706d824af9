// Branches of a thread, as GET /v1/threads/{id}/branches gives them, turned
// into what a conversation view needs: where the conversation forks along
// the path shown, the alternatives there, and which one the path takes.
// Pure functions, no DOM.
//
// A branch b grows from message forkSeq of its parent (the branch that owns
// that message); its path is its own messages, then its parent's up to
// forkSeq, and so on to branch 0. Message seqs are global per thread, so a
// branch's own messages all come after its fork point.

// chainOf is branch id's chain: [{id, upto}] from the branch itself (upto
// Infinity) through its parents (upto: the fork point on each) to branch 0.
export function chainOf(byId, id) {
  const out = [];
  let cur = byId.get(id);
  let upto = Infinity;
  const seen = new Set();
  while (cur && !seen.has(cur.id)) {
    seen.add(cur.id);
    out.push({ id: cur.id, upto });
    if (cur.id === 0) break;
    upto = cur.forkSeq;
    cur = byId.get(cur.parent);
  }
  return out;
}

// ownerOf says which branch of a chain owns message seq: the first one
// (from the branch outwards) whose fork point is before it.
export function ownerOf(byId, chain, seq) {
  for (const c of chain) {
    const b = byId.get(c.id);
    if (c.id === 0 || seq > b.forkSeq) return c.id;
  }
  return 0;
}

// inSubtree says whether branch y's path goes through alternative alt of a
// fork at seq f owned by branch owner: for the owner's own line, through
// its messages after f; for a branch forking at f, through that branch.
function inSubtree(byId, y, alt, owner, f) {
  return chainOf(byId, y).some((c) => c.id === alt && (alt !== owner || c.upto > f));
}

// forks lays out the forks along the path of branch `viewed` (its
// messages' seqs in order, `seqs`): one entry per message of the path where
// two or more lines part, {seq, owner, alts: [{branch, show, head}],
// current}. alts are the owner's own line first, then the branches that
// grow from that message, oldest first; `show` is the branch to load to see
// that alternative (the head when the head lies that way, else the
// alternative's own branch), `head` whether the head lies that way;
// `current` is the index of the alternative the viewed path takes.
export function forks(branches, viewed, head, seqs) {
  const byId = new Map(branches.map((b) => [b.id, b]));
  if (!byId.has(viewed)) return [];
  const chain = chainOf(byId, viewed);
  const children = new Map(); // "parent:forkSeq" → [branch ids]
  for (const b of branches) {
    if (b.id === 0) continue;
    const k = `${b.parent}:${b.forkSeq}`;
    if (!children.has(k)) children.set(k, []);
    children.get(k).push(b.id);
  }
  const out = [];
  for (const seq of seqs) {
    const owner = ownerOf(byId, chain, seq);
    const kids = children.get(`${owner}:${seq}`);
    if (!kids) continue;
    const ids = [owner, ...kids.slice().sort((a, b) => a - b)];
    // The viewed path takes the first alternative met walking its chain
    // from the viewed branch outwards.
    let current = 0;
    for (const c of chain) {
      const i = ids.indexOf(c.id);
      if (i >= 0 && (c.id !== owner || c.upto > seq)) { current = i; break; }
    }
    const alts = ids.map((id) => {
      const towardsHead = inSubtree(byId, head, id, owner, seq);
      return { branch: id, show: towardsHead ? head : id, head: towardsHead };
    });
    alts[current].show = viewed;
    out.push({ seq, owner, alts, current });
  }
  return out;
}
