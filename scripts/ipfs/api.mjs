/**
 * The Kubo RPC subset served by the local node (https://docs.ipfs.tech/reference/kubo/rpc/):
 * add, cat, pin/add, pin/rm, pin/ls, block/stat, version, id — POST only,
 * with Kubo's JSON shapes and its error body {"Message","Code","Type":"error"};
 * pubsub/{pub,sub,ls,peers} and swarm/{connect,peers} come from pubsub.mjs.
 *
 * cat, pin/add and block/stat fetch a block the node lacks from connected
 * peers (bitswap; fetch.mjs: one deadline and one byte cap per request) and
 * take Kubo's options `timeout` (Go duration, whole request) and `offline`
 * (no peer asked); `cat` also `offset` and `length` (bytes). A block on disk
 * is read as it always was.
 *
 * CIDs match `ipfs add` of Kubo for the same options: fixed-size chunks of
 * 262144 bytes, balanced DAG of at most 174 links per node, raw leaves by
 * default with cid-version=1 (dag-pb leaves with cid-version=0).
 */
import { importer } from 'ipfs-unixfs-importer'
import { fixedSize } from 'ipfs-unixfs-importer/chunker'
import { balanced } from 'ipfs-unixfs-importer/layout'
import { unixfs } from '@helia/unixfs'
import * as dagPb from '@ipld/dag-pb'
import { CID } from 'multiformats/cid'
import { publicKeyToProtobuf } from '@libp2p/crypto/keys'
import { boundaryOf, parseMultipart, MultipartError } from './multipart.mjs'
import { FetchError, FetchScope, MAX_FETCH_BYTES, ReceivedBlocks, parseGoDuration } from './fetch.mjs'

export const KUBO_CHUNK_SIZE = 262144
export const KUBO_MAX_LINKS = 174
const RAW = 0x55
const DAG_PB = 0x70
const WALK_CONCURRENCY = 16 // blocks of one DAG level read (or fetched) at once

/** An error answered as Kubo does: HTTP status + {"Message","Code","Type"}. */
export class ApiError extends Error {
  constructor (status, message, code = 0) {
    super(message)
    this.status = status
    this.code = code
  }
}

const notFound = (cid) => new ApiError(500, `block was not found locally (offline): ipld: could not find ${cid}`)

function isMissingBlock (err) {
  return ['NotFoundError', 'BlockNotFoundWhileOfflineError', 'LoadBlockFailedError'].includes(err?.name) ||
    /No block brokers|cannot be fetched from the network|not found/i.test(err?.message ?? '')
}

function boolParam (params, name, dflt) {
  const v = params.get(name)
  if (v == null) return dflt
  if (v === '' || v === 'true' || v === '1') return true
  if (v === 'false' || v === '0') return false
  throw new ApiError(400, `invalid value for option "${name}": ${JSON.stringify(v)} (expected true or false)`, 1)
}

/** Parse `arg` as a CID or /ipfs/<cid>. */
function parseCidArg (arg) {
  let s = arg.trim()
  if (s.startsWith('/ipfs/')) s = s.slice(6)
  if (s.endsWith('/')) s = s.slice(0, -1)
  if (s.includes('/')) throw new ApiError(500, `invalid path ${JSON.stringify(arg)}: paths inside a DAG are not supported by this node`)
  try {
    return CID.parse(s)
  } catch (err) {
    throw new ApiError(500, `invalid path ${JSON.stringify(arg)}: invalid cid: ${err.message}`)
  }
}

export function requiredArgs (params, argName) {
  const args = params.getAll('arg')
  if (args.length === 0) throw new ApiError(400, `argument "${argName}" is required`, 1)
  return args
}

export function sendJson (res, status, body) {
  const text = JSON.stringify(body)
  res.writeHead(status, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(text) + 1,
    'Cache-Control': 'no-cache'
  })
  res.end(text + '\n')
}

export function sendError (res, err) {
  if (res.headersSent) { res.destroy(err); return }
  const status = err instanceof ApiError ? err.status : 500
  const code = err instanceof ApiError ? err.code : 0
  sendJson(res, status, { Message: err.message, Code: code, Type: 'error' })
}

export class KuboApi {
  /**
   * @param {{helia: object, privateKey: object, peerId: object}} node - from openRepo()
   * @param {{agentVersion: string, version: string}} info
   * @param {object|null} libp2p - the swarm from startSwarm(), serving /id's addresses
   * @param {Record<string, Function>} extraRoutes - e.g. PubsubApi.routes()
   * @param {{maxFetchBytes?: number}} limits - bytes one request may take from peers (fetch.mjs)
   */
  constructor (node, info, libp2p = null, extraRoutes = {}, { maxFetchBytes = MAX_FETCH_BYTES } = {}) {
    this.helia = node.helia
    this.maxFetchBytes = maxFetchBytes
    this.privateKey = node.privateKey
    this.peerId = node.peerId
    this.info = info
    this.libp2p = libp2p
    this.pinQueue = Promise.resolve() // pin changes run one at a time
    this.received = new ReceivedBlocks(this.helia)
    this.routes = {
      '/api/v0/add': (req, res, p) => this.add(req, res, p),
      '/api/v0/cat': (req, res, p) => this.cat(req, res, p),
      '/api/v0/pin/add': (req, res, p) => this.pinAdd(req, res, p),
      '/api/v0/pin/rm': (req, res, p) => this.pinRm(req, res, p),
      '/api/v0/pin/ls': (req, res, p) => this.pinLs(req, res, p),
      '/api/v0/block/stat': (req, res, p) => this.blockStat(req, res, p),
      '/api/v0/version': (req, res, p) => this.version(req, res, p),
      '/api/v0/id': (req, res, p) => this.id(req, res, p),
      '/api/v0/bitswap/stat': (req, res, p) => sendJson(res, 200, this.received.stat()),
      ...extraRoutes
    }
  }

  /** Dispatch one HTTP request. Never throws. */
  async handle (req, res) {
    try {
      const url = new URL(req.url, 'http://127.0.0.1')
      const route = this.routes[url.pathname.replace(/\/+$/, '')]
      if (route == null) throw new ApiError(404, `unknown command ${JSON.stringify(url.pathname)}: this node serves ${Object.keys(this.routes).join(', ')}`)
      if (req.method !== 'POST') throw new ApiError(405, `method ${req.method} not allowed: the RPC API takes POST only`)
      const origin = req.headers.origin
      if (origin != null && origin !== `http://${req.headers.host}`) throw new ApiError(403, `origin ${origin} is not allowed`)
      await route(req, res, url.searchParams)
    } catch (caught) {
      // the fetch's own message is Kubo's shape already ("... could not find <cid>", "context deadline exceeded")
      const err = caught instanceof FetchError ? new ApiError(500, caught.message) : caught
      if (err?.code === 'ECONNRESET' || err?.message === 'aborted') {
        console.error(`ipfs node: ${req.method} ${req.url}: the client went away mid-request`)
      } else if (!(err instanceof ApiError)) {
        console.error(`ipfs node: ${req.method} ${req.url}: ${err.stack ?? err}`)
      }
      sendError(res, err)
    }
  }

  async readBlock (cid) {
    const chunks = []
    try {
      for await (const c of this.helia.blockstore.get(cid, { offline: true })) chunks.push(c)
    } catch (err) {
      if (isMissingBlock(err)) throw notFound(cid)
      throw err
    }
    return Buffer.concat(chunks)
  }

  /**
   * Every CID of the DAG under `cid` (raw and dag-pb only), root first, level by level.
   * Without `scope` local blocks only (throws notFound if one is missing); with a
   * FetchScope every missing block is fetched from peers (and stored) under its limits.
   */
  async dagCids (cid, scope = null) {
    const out = []
    let level = [cid]
    while (level.length > 0) {
      out.push(...level)
      const next = []
      for (let i = 0; i < level.length; i += WALK_CONCURRENCY) {
        const links = await Promise.all(level.slice(i, i + WALK_CONCURRENCY).map(c => this.linksOf(c, scope)))
        for (const l of links) next.push(...l)
      }
      level = next
    }
    return out
  }

  /** The CIDs `cid` links to ([] for a raw leaf), checking that its block is here (or fetching it with `scope`). */
  async linksOf (cid, scope) {
    if (cid.code !== RAW && cid.code !== DAG_PB) throw new ApiError(500, `cannot walk ${cid}: codec 0x${cid.code.toString(16)} is not supported by this node (raw and dag-pb only)`)
    if (cid.code === RAW) {
      if (scope != null) await scope.block(cid)
      else if (!(await this.helia.blockstore.has(cid))) throw notFound(cid)
      return []
    }
    const bytes = scope != null ? await scope.block(cid) : await this.readBlock(cid)
    return dagPb.decode(bytes).Links.map(l => l.Hash)
  }

  /**
   * The FetchScope of one request: Kubo's `timeout` (whole request) and `offline`
   * options; what it fetches stops when the client goes away.
   */
  fetchScope (res, params) {
    let timeoutMs = null
    if (params.get('timeout') != null) {
      try {
        timeoutMs = parseGoDuration(params.get('timeout'))
      } catch (err) {
        throw new ApiError(400, `invalid value for option "timeout": ${err.message}`, 1)
      }
    }
    const gone = new AbortController()
    const scope = new FetchScope({
      helia: this.helia,
      libp2p: this.libp2p,
      offline: boolParam(params, 'offline', false),
      timeoutMs,
      maxBytes: this.maxFetchBytes,
      signal: gone.signal
    })
    res.once('close', () => {
      scope.dispose()
      gone.abort(new ApiError(500, 'the client went away'))
    })
    return scope
  }

  importOptions (params) {
    const cidVersion = parseInt(params.get('cid-version') ?? '0', 10)
    if (cidVersion !== 0 && cidVersion !== 1) throw new ApiError(400, `unknown CID version ${params.get('cid-version')}`, 1)
    const hash = params.get('hash') ?? 'sha2-256'
    if (hash !== 'sha2-256') throw new ApiError(400, `hash function ${hash} is not supported by this node (sha2-256 only)`, 1)
    const chunkerSpec = params.get('chunker') ?? `size-${KUBO_CHUNK_SIZE}`
    const m = /^size-(\d+)$/.exec(chunkerSpec)
    if (m == null) throw new ApiError(400, `chunker ${chunkerSpec} is not supported by this node (size-<bytes> only)`, 1)
    for (const opt of ['trickle', 'wrap-with-directory', 'inline', 'nocopy', 'fscache', 'to-files']) {
      if (params.get(opt) != null && params.get(opt) !== 'false') throw new ApiError(400, `option ${opt} is not supported by this node`, 1)
    }
    return {
      cidVersion,
      rawLeaves: boolParam(params, 'raw-leaves', cidVersion === 1),
      reduceSingleLeafToSelf: true,
      chunker: fixedSize({ chunkSize: parseInt(m[1], 10) }),
      layout: balanced({ maxChildrenPerNode: KUBO_MAX_LINKS }),
      leafType: 'file'
    }
  }

  async add (req, res, params) {
    const options = this.importOptions(params)
    const pin = boolParam(params, 'pin', true)
    const onlyHash = boolParam(params, 'only-hash', false)
    const discard = { put: async (cid) => cid }
    const store = onlyHash ? discard : this.helia.blockstore
    let parts
    try {
      parts = parseMultipart(req, boundaryOf(req.headers['content-type']))
    } catch (err) {
      throw err instanceof MultipartError ? new ApiError(400, err.message, 1) : err
    }
    const results = []
    try {
      for await (const part of parts) {
        const ctype = part.headers['content-type'] ?? ''
        if (ctype.startsWith('application/x-directory')) throw new ApiError(400, 'directories are not supported by this node: add files one by one', 1)
        let entry
        for await (const e of importer([{ content: part.body }], store, options)) entry = e
        if (entry == null) throw new ApiError(400, 'empty upload', 1)
        const cid = entry.cid.toString()
        if (pin && !onlyHash) await this.pinRecursive(entry.cid)
        results.push({ Name: part.filename || cid, Hash: cid, Size: String(entry.size) })
      }
    } catch (err) {
      throw err instanceof MultipartError ? new ApiError(400, err.message, 1) : err
    }
    if (results.length === 0) throw new ApiError(400, 'file argument \'path\' is required', 1)
    const text = results.map(r => JSON.stringify(r) + '\n').join('')
    res.writeHead(200, { 'Content-Type': 'application/json', 'X-Chunked-Output': '1', 'Content-Length': Buffer.byteLength(text) })
    res.end(text)
  }

  async cat (req, res, params) {
    const [arg] = requiredArgs(params, 'ipfs-path')
    const cid = parseCidArg(arg)
    const offset = params.get('offset') != null ? parseInt(params.get('offset'), 10) : undefined
    const length = params.get('length') != null ? parseInt(params.get('length'), 10) : undefined
    const scope = this.fetchScope(res, params)
    let iterator
    let first
    try {
      // the scope reads local blocks and fetches the others: only the blocks
      // of [offset, offset + length) are read
      iterator = unixfs({ blockstore: scope }).cat(cid, { offset, length, signal: scope.signal })[Symbol.asyncIterator]()
      first = await iterator.next() // resolve the root before the status line goes out
    } catch (err) {
      if (err instanceof FetchError || err instanceof ApiError) throw err
      if (scope.signal.aborted) throw new ApiError(500, `cannot read ${cid}: ${scope.signal.reason?.message ?? 'context deadline exceeded'}`)
      if (isMissingBlock(err)) throw notFound(cid)
      if (err?.name === 'NotAFileError') throw new ApiError(500, 'this dag node is a directory')
      throw new ApiError(500, `cannot read ${cid}: ${err.message}`)
    }
    res.writeHead(200, { 'Content-Type': 'text/plain', 'X-Stream-Output': '1', 'Trailer': 'X-Stream-Error' })
    try {
      if (!first.done) {
        res.write(first.value)
        while (true) {
          const { value, done } = await iterator.next()
          if (done) break
          if (scope.signal.aborted) throw new Error(`cannot read ${cid}: context deadline exceeded`)
          if (!res.write(value)) await new Promise(resolve => res.once('drain', resolve))
        }
      }
      res.end()
    } catch (err) {
      // Kubo reports a failure mid-stream in a trailer; also cut the
      // connection so that a client that ignores trailers sees a short body.
      res.addTrailers({ 'X-Stream-Error': String(err.message).replace(/[\r\n]/g, ' ') })
      res.destroy(err)
    }
  }

  /**
   * Pin `cid` recursively (idempotent); upgrades a direct pin. With a FetchScope
   * the blocks missing here are first fetched from peers (outside the pin queue).
   */
  async pinRecursive (cid, depth = Infinity, scope = null) {
    if (scope != null) {
      if (depth === 0) await scope.block(cid)
      else await this.dagCids(cid, scope)
    }
    const run = async () => {
      // all blocks must be here before any pin record changes
      if (depth === 0) await this.readBlock(cid)
      else await this.dagCids(cid)
      let existing = null
      try { existing = await this.helia.pins.get(cid) } catch { existing = null }
      if (existing != null) {
        if (existing.depth === depth) return
        // As Kubo: a recursive pin is not downgraded to a direct one.
        if (depth === 0) throw new ApiError(500, `pin: ${cid} already pinned recursively`)
        for await (const _ of this.helia.pins.rm(cid, { offline: true })) { /* walk */ }
      }
      for await (const _ of this.helia.pins.add(cid, { depth, offline: true, metadata: { cid: cid.toString() } })) { /* walk */ }
    }
    const next = this.pinQueue.then(run, run)
    this.pinQueue = next.catch(() => {})
    return next
  }

  async pinAdd (req, res, params) {
    const cids = requiredArgs(params, 'ipfs-path').map(parseCidArg)
    const depth = boolParam(params, 'recursive', true) ? Infinity : 0
    const scope = this.fetchScope(res, params)
    for (const cid of cids) await this.pinRecursive(cid, depth, scope)
    sendJson(res, 200, { Pins: cids.map(c => c.toString()) })
  }

  async pinRm (req, res, params) {
    const cids = requiredArgs(params, 'ipfs-path').map(parseCidArg)
    const run = async () => {
      for (const cid of cids) {
        let pinned = true
        try { await this.helia.pins.get(cid) } catch { pinned = false }
        if (!pinned) throw new ApiError(500, `${cid} is not pinned`)
        for await (const _ of this.helia.pins.rm(cid, { offline: true })) { /* walk */ }
      }
    }
    const next = this.pinQueue.then(run, run)
    this.pinQueue = next.catch(() => {})
    await next
    sendJson(res, 200, { Pins: cids.map(c => c.toString()) })
  }

  async pinLs (req, res, params) {
    const type = params.get('type') ?? 'all'
    if (!['all', 'direct', 'recursive', 'indirect'].includes(type)) throw new ApiError(400, `invalid type '${type}', must be one of {direct, indirect, recursive, all}`, 1)
    const pins = new Map() // v1 cid string -> {shown, type}
    for await (const pin of this.helia.pins.ls()) {
      const shown = typeof pin.metadata?.cid === 'string' ? pin.metadata.cid : pin.cid.toString()
      pins.set(pin.cid.toV1().toString(), { shown, cid: pin.cid, type: pin.depth === 0 ? 'direct' : 'recursive' })
    }
    const indirect = new Map() // v1 cid string -> {shown, through}
    const wantIndirect = type === 'all' || type === 'indirect' || params.getAll('arg').length > 0
    if (wantIndirect) {
      for (const pin of pins.values()) {
        if (pin.type !== 'recursive') continue
        let cids
        try { cids = await this.dagCids(pin.cid) } catch { continue }
        for (const c of cids.slice(1)) {
          const key = c.toV1().toString()
          if (!pins.has(key) && !indirect.has(key)) indirect.set(key, { shown: c.toString(), through: pin.shown })
        }
      }
    }
    const keys = {}
    const args = params.getAll('arg')
    if (args.length > 0) {
      for (const arg of args) {
        const cid = parseCidArg(arg)
        const key = cid.toV1().toString()
        const pin = pins.get(key)
        if (pin != null && (type === 'all' || type === pin.type)) keys[cid.toString()] = { Type: pin.type }
        else if (indirect.has(key) && (type === 'all' || type === 'indirect')) keys[cid.toString()] = { Type: `indirect through ${indirect.get(key).through}` }
        else throw new ApiError(500, `path '${arg}' is not pinned`)
      }
    } else {
      for (const pin of pins.values()) if (type === 'all' || type === pin.type) keys[pin.shown] = { Type: pin.type }
      if (type === 'all' || type === 'indirect') for (const ind of indirect.values()) keys[ind.shown] = { Type: 'indirect' }
    }
    if (boolParam(params, 'stream', false)) {
      const text = Object.entries(keys).map(([c, v]) => JSON.stringify({ Cid: c, Type: v.Type }) + '\n').join('')
      res.writeHead(200, { 'Content-Type': 'application/json', 'X-Chunked-Output': '1', 'Content-Length': Buffer.byteLength(text) })
      res.end(text)
      return
    }
    sendJson(res, 200, { Keys: keys })
  }

  async blockStat (req, res, params) {
    const [arg] = requiredArgs(params, 'cid')
    const cid = parseCidArg(arg)
    const block = await this.fetchScope(res, params).block(cid)
    sendJson(res, 200, { Key: cid.toString(), Size: block.length })
  }

  async version (req, res) {
    sendJson(res, 200, {
      Version: this.info.version,
      Commit: '',
      Repo: '1',
      System: `${process.arch === 'x64' ? 'amd64' : process.arch}/${process.platform}`,
      Golang: `none: Helia ${this.info.heliaVersion} on Node ${process.version}`,
      Implementation: this.info.agentVersion
    })
  }

  async id (req, res) {
    sendJson(res, 200, {
      ID: this.peerId.toString(),
      PublicKey: Buffer.from(publicKeyToProtobuf(this.privateKey.publicKey)).toString('base64'),
      Addresses: this.libp2p == null ? [] : this.libp2p.getMultiaddrs().map(String),
      AgentVersion: this.info.agentVersion,
      ProtocolVersion: 'ipfs/0.1.0',
      Protocols: this.libp2p == null ? [] : this.libp2p.getProtocols().sort()
    })
  }
}
