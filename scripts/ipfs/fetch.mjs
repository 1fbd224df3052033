/**
 * Blocks fetched from connected peers for one API request, under one deadline
 * and one byte cap (bitswap, through Helia's networked blockstore).
 *
 * A FetchScope stands for one request that may need a block the node does not
 * hold (cat, pin/add, block/stat). Its `get(cid)` reads a local block as
 * before (no deadline, no network) and asks the connected peers for any other
 * one, then:
 *   - `offline=true` in the request: no peer is asked (BlockMissingError);
 *   - no peer connected: fails at once (BlockMissingError), as before bitswap;
 *   - deadline: the request's Kubo `timeout` option (a Go duration, "30s",
 *     "1m30s", "500ms") bounds the whole request; without it every network
 *     fetch of the request must end within DEFAULT_FETCH_TIMEOUT_MS of the
 *     first one (FetchDeadlineError, Kubo's "context deadline exceeded");
 *   - byte cap: at most `maxBytes` bytes (default MAX_FETCH_BYTES) come from
 *     peers in one request (FetchCapError; a block is counted once it arrived
 *     and is stored, so the cap is overshot by the blocks then in flight, at
 *     most 4 MiB each);
 *   - the HTTP client going away aborts what is in flight.
 * Fetched blocks are checked against their CID by Helia, stored in the
 * blockstore and announced to peers that want them; they are not pinned.
 *
 * One copy of each block (issue #25): a missing block is first asked of the
 * peer that sent the request's previous block (WANT-BLOCK to it alone), else
 * every connected peer is asked whether it has it (WANT-HAVE, answered within
 * PRESENCE_TIMEOUT_MS) and the first that has it is asked for it (WANT-BLOCK).
 * Only when no peer says it has the block (yet), or that peer fails to send it
 * within `blockWaitMs` (BLOCK_TIMEOUT_MS, at most a third of the request's
 * deadline), is it wanted from every peer at once (Helia's broadcast
 * WANT-BLOCK, until the deadline). A peer cut off while it sends a file stays
 * "connected" until its connection times out: waiting longer for it than the
 * request may last made one lost peer fail the whole request (`make
 * demo-hosts` with the syncer's host cut: a trainer's read of the weights).
 * Sending WANT-BLOCK to every peer first, as Helia's broker does, made every
 * peer that held a block send it: a trainer host of `make demo-hosts`
 * received 5-6 copies of what it stored.
 */

/** ms: how long the connected peers have to say whether they hold a block (WANT-HAVE). */
export const PRESENCE_TIMEOUT_MS = 3_000
/** ms: most the one peer asked for a block has to send it before the others are asked (1 MiB at 1 Mbit/s: 8.4 s). */
export const BLOCK_TIMEOUT_MS = 10_000

/** ms: deadline of a request's network fetches when it names no `timeout`. */
export const DEFAULT_FETCH_TIMEOUT_MS = 60_000
/**
 * bytes: most bytes one request takes from peers: the Python client's
 * DEFAULT_MAX_BYTES (1 GiB) plus room for the dag-pb nodes above the leaves
 * (16 MiB; a 1 GiB file in Kubo's layout has about 0.2 MiB of them).
 */
export const MAX_FETCH_BYTES = (1 << 30) + (16 << 20)

export class FetchError extends Error {
  constructor (message, cid) {
    super(message)
    this.name = this.constructor.name
    this.cid = cid
  }
}

/** The block is not local and no peer may be asked (offline request, or nobody connected). */
export class BlockMissingError extends FetchError {
  constructor (cid, why) {
    super(`block was not found locally (${why}): ipld: could not find ${cid}`, cid)
  }
}

/** No connected peer sent the block before the request's deadline. */
export class FetchDeadlineError extends FetchError {
  constructor (cid, ms, peers) {
    super(`block was not found on the ${peers} connected peer(s) within ${ms / 1000} s: ipld: could not find ${cid}: context deadline exceeded`, cid)
    this.ms = ms
  }
}

/** The request took more bytes from peers than its cap. */
export class FetchCapError extends FetchError {
  constructor (cid, cap, fetched) {
    super(`fetching ${cid} from peers refused: ${fetched} bytes fetched, over the cap of ${cap} bytes for one request`, cid)
    this.cap = cap
    this.fetched = fetched
  }
}

const GO_UNITS_MS = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 }

/**
 * Parse a Go duration (time.ParseDuration: "300ms", "1.5s", "2m3s", "1h") into ms.
 * @returns {number} milliseconds (> 0)
 * @throws {RangeError} when `text` is not a positive Go duration
 */
export function parseGoDuration (text) {
  const s = String(text).trim()
  const re = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/y
  let ms = 0
  let pos = 0
  while (pos < s.length) {
    re.lastIndex = pos
    const m = re.exec(s)
    if (m == null) throw new RangeError(`invalid duration ${JSON.stringify(text)} (Go syntax: 300ms, 1.5s, 2m)`)
    ms += Number(m[1]) * GO_UNITS_MS[m[2]]
    pos = re.lastIndex
  }
  if (!(ms > 0) || !Number.isFinite(ms)) throw new RangeError(`invalid duration ${JSON.stringify(text)}: must be above 0`)
  return ms
}

export class FetchScope {
  /**
   * @param {object} opts
   * @param {object} opts.helia - started Helia (its blockstore asks the block brokers for missing blocks)
   * @param {object|null} opts.libp2p - the swarm (connected peers); null: no peer is ever asked
   * @param {boolean} [opts.offline] - never ask a peer
   * @param {number|null} [opts.timeoutMs] - the request's own deadline (ms, whole request), or null
   * @param {number} [opts.maxBytes] - most bytes taken from peers (default MAX_FETCH_BYTES)
   * @param {AbortSignal} [opts.signal] - aborted when the client goes away
   */
  constructor ({ helia, libp2p, offline = false, timeoutMs = null, maxBytes = MAX_FETCH_BYTES, signal = null }) {
    this.helia = helia
    this.libp2p = libp2p
    this.offline = offline
    this.maxBytes = maxBytes
    this.fetchedBytes = 0
    this.fetchedBlocks = 0
    this.wantList = bitswapWantList(helia)
    this.source = null // the peer that sent this request's last block
    this.deadline = new AbortController()
    this.deadlineMs = timeoutMs ?? DEFAULT_FETCH_TIMEOUT_MS
    /** ms: how long the one peer asked for a block may take before the others are asked */
    this.blockWaitMs = Math.min(BLOCK_TIMEOUT_MS, this.deadlineMs / 3)
    this.timer = null
    if (timeoutMs != null) this.armDeadline()
    /** aborted when the client went away or the request's deadline passed */
    this.signal = signal == null ? this.deadline.signal : AbortSignal.any([signal, this.deadline.signal])
  }

  armDeadline () {
    if (this.timer != null) return
    // setTimeout fires at once beyond 2^31 - 1 ms (24.8 days): cap it there
    this.timer = setTimeout(() => this.deadline.abort(), Math.min(this.deadlineMs, 2 ** 31 - 1))
    this.timer.unref?.()
  }

  /** Stop the deadline's timer; call once the request is answered. */
  dispose () {
    clearTimeout(this.timer)
  }

  async has (cid) {
    return this.helia.blockstore.has(cid)
  }

  /** The block `cid`, local or from a peer, as an async iterable of bytes (the blockstore interface). */
  async * get (cid, options = {}) {
    yield await this.block(cid, options)
  }

  /**
   * The bytes of block `cid`: local, else fetched from the connected peers.
   * @throws BlockMissingError, FetchDeadlineError, FetchCapError; an AbortError when the client went away
   */
  async block (cid, options = {}) {
    if (await this.helia.blockstore.has(cid)) return concat(this.helia.blockstore.get(cid, { offline: true }))
    if (this.offline) throw new BlockMissingError(cid, 'offline')
    const peers = this.libp2p?.getPeers().length ?? 0
    if (peers === 0) throw new BlockMissingError(cid, 'no connected peer to fetch it from')
    this.armDeadline()
    const signal = options.signal == null ? this.signal : AbortSignal.any([this.signal, options.signal])
    let block
    try {
      signal.throwIfAborted()
      block = await this.fromOnePeer(cid, signal) ?? await concat(this.helia.blockstore.get(cid, { signal }))
    } catch (err) {
      if (this.deadline.signal.aborted) throw new FetchDeadlineError(cid, this.deadlineMs, peers)
      if (this.signal.aborted) throw this.signal.reason ?? err // the client went away
      throw err
    }
    this.fetchedBytes += block.length
    this.fetchedBlocks += 1
    if (this.fetchedBytes > this.maxBytes) throw new FetchCapError(cid, this.maxBytes, this.fetchedBytes)
    return block
  }

  /**
   * Block `cid` from one peer (see the module comment), stored in the blockstore;
   * null when no peer said it has it in time or the one asked did not send it.
   */
  async fromOnePeer (cid, signal) {
    if (this.wantList == null) return null
    const peers = this.libp2p.getPeers()
    let block = null
    if (this.source != null && peers.some(p => p.equals(this.source))) block = await this.askBlock(cid, this.source, signal)
    if (block == null) {
      this.source = null // it did not send this one: it is asked again only if it answers the next WANT-HAVE first
      const holder = await this.firstHolder(cid, peers, signal)
      if (holder == null) return null
      block = holder.block ?? await this.askBlock(cid, holder.peer, signal)
      if (block == null) return null
      this.source = holder.peer
    }
    await this.helia.blockstore.put(cid, block, { signal })
    return block
  }

  /**
   * The first of `peers` to say it has `cid` (WANT-HAVE, PRESENCE_TIMEOUT_MS), with the block
   * when it sent that instead (at most 1 KiB); null when none did in time.
   */
  async firstHolder (cid, peers, signal) {
    const round = new AbortController()
    const limit = AbortSignal.any([signal, round.signal, AbortSignal.timeout(PRESENCE_TIMEOUT_MS)])
    try {
      return await Promise.any(peers.map(async (peer) => {
        const presence = await this.wantList.wantSessionPresence(cid, peer, { signal: limit })
        if (!presence.has) throw new Error(`${peer} does not have ${cid}`)
        return { peer, block: presence.block }
      }))
    } catch {
      signal.throwIfAborted()
      return null
    } finally {
      round.abort() // stop waiting for the other peers' answers
    }
  }

  /** Block `cid` from `peer` alone (WANT-BLOCK); null when it does not send it within `blockWaitMs`. */
  async askBlock (cid, peer, signal) {
    try {
      const answer = await this.wantList.wantSessionBlock(cid, peer, { signal: AbortSignal.any([signal, AbortSignal.timeout(this.blockWaitMs)]) })
      return answer.has ? answer.block ?? null : null
    } catch {
      signal.throwIfAborted()
      return null
    }
  }
}

/** The want list of the node's bitswap block broker (@helia/bitswap), or null without one. */
function bitswapWantList (helia) {
  return helia.blockBrokers?.find(b => b.name === 'bitswap')?.bitswap?.wantList ?? null
}

/**
 * What this node's bitswap received, in Kubo's `bitswap stat` terms: every block
 * that arrived (BlocksReceived, DataReceived bytes) and those that had arrived
 * before (DupBlksReceived, DupDataReceived): a duplicate is a second copy sent
 * by another peer. Counts from the node's start.
 */
export class ReceivedBlocks {
  constructor (helia) {
    this.blocks = 0
    this.bytes = 0
    this.dupBlocks = 0
    this.dupBytes = 0
    this.seen = new Set()
    bitswapWantList(helia)?.addEventListener('block', (evt) => this.count(evt.detail.cid, evt.detail.block.length))
  }

  count (cid, bytes) {
    const key = Buffer.from(cid.multihash.bytes).toString('base64')
    this.blocks += 1
    this.bytes += bytes
    if (this.seen.has(key)) {
      this.dupBlocks += 1
      this.dupBytes += bytes
      return
    }
    if (this.seen.size >= 1_000_000) this.seen.clear() // bounded memory; dups of older blocks go uncounted
    this.seen.add(key)
  }

  stat () {
    return { BlocksReceived: this.blocks, DataReceived: this.bytes, DupBlksReceived: this.dupBlocks, DupDataReceived: this.dupBytes }
  }
}

async function concat (chunks) {
  const parts = []
  for await (const c of chunks) parts.push(c)
  return parts.length === 1 ? parts[0] : Buffer.concat(parts)
}
