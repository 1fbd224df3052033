/**
 * Kubo RPC pubsub and swarm endpoints over the node's libp2p swarm (swarm.mjs):
 *
 *   POST /api/v0/pubsub/pub?arg=<u-topic>    body: multipart/form-data, one part = the message data
 *        -> 200, empty body
 *   POST /api/v0/pubsub/sub?arg=<u-topic>    -> 200, a stream of newline-delimited JSON messages
 *        {"from":"12D3Koo...","data":"u<b64url>","seqno":"u<b64url>","topicIDs":["u<b64url>"]}
 *        headers go out at once (the subscription exists from then on); the stream ends when
 *        the client disconnects, which also ends the subscription.
 *   POST /api/v0/pubsub/ls                   -> {"Strings": ["u<b64url topic>", ...]}
 *   POST /api/v0/pubsub/peers[?arg=<u-topic>] -> {"Strings": ["12D3Koo...", ...]} (sorted; peers
 *        subscribed to the topic, or every pubsub peer without arg)
 *   POST /api/v0/swarm/connect?arg=<multiaddr with /p2p/<peer id>> -> {"Strings": ["connect <id> success"]}
 *   POST /api/v0/swarm/peers                 -> {"Peers": [{"Addr": "<multiaddr>", "Peer": "<id>"}]}
 *
 * As Kubo (core/commands/pubsub.go): topics in `arg` and in answers, message data and seqno
 * are multibase base64url with the `u` prefix, unpadded; another base in `arg` is refused
 * with "URL arg must be base64url encoded" (HTTP 500, Code 0). A missing argument is HTTP
 * 400, Code 1.
 *
 * Limits of this node: message data at most MAX_MESSAGE_BYTES (an upload over it is refused,
 * HTTP 500); topics of 1..MAX_TOPIC_BYTES bytes of UTF-8; a subscriber whose connection holds
 * more than MAX_BUFFERED_BYTES unread loses messages (counted, logged) rather than the node
 * buffering without bound, as go-libp2p-pubsub drops messages for a slow subscriber.
 */
import { multiaddr } from '@multiformats/multiaddr'
import { ApiError, requiredArgs, sendJson } from './api.mjs'
import { boundaryOf, parseMultipart, MultipartError } from './multipart.mjs'
import { MAX_MESSAGE_BYTES } from './swarm.mjs'

export const MAX_TOPIC_BYTES = 1024
const MAX_BUFFERED_BYTES = 16 * 1024 * 1024 // per subscriber connection
const DIAL_TIMEOUT_MS = 10000
const utf8 = new TextDecoder('utf-8', { fatal: true })
const OTHER_BASES = { // multibase prefix -> alphabet of its body
  m: /^[A-Za-z0-9+/]*={0,2}$/,
  M: /^[A-Za-z0-9+/]*={0,2}$/,
  U: /^[A-Za-z0-9_-]*={0,2}$/,
  f: /^([0-9a-f]{2})*$/,
  F: /^([0-9A-F]{2})*$/,
  b: /^[a-z2-7]*$/,
  B: /^[A-Z2-7]*$/,
  z: /^[1-9A-HJ-NP-Za-km-z]*$/
}

/** Multibase base64url (`u`, unpadded) of bytes, as Kubo's encoder.Encode. */
export function multibase (bytes) {
  return 'u' + Buffer.from(bytes).toString('base64url')
}

/** Bytes of a `u`-multibase string; throws ApiError with Kubo's messages. */
function fromMultibase (text) {
  if (text.length === 0) throw new ApiError(500, 'URL arg must be multibase encoded: cannot decode multibase for zero length string')
  const prefix = text[0]
  const body = text.slice(1)
  if (prefix !== 'u') {
    // Kubo decodes any multibase, then refuses all but base64url; this node checks the
    // alphabet of the common bases to tell the two errors apart as Kubo would.
    const valid = OTHER_BASES[prefix]
    if (valid != null && valid.test(body)) throw new ApiError(500, 'URL arg must be base64url encoded')
    throw new ApiError(500, `URL arg must be multibase encoded: cannot decode ${JSON.stringify(text.slice(0, 80))} (this node takes base64url, prefix u)`)
  }
  if (!/^[A-Za-z0-9_-]*$/.test(body) || body.length % 4 === 1) {
    throw new ApiError(500, 'URL arg must be multibase encoded: illegal base64url data')
  }
  return Buffer.from(body, 'base64url')
}

function topicArg (params, required = true) {
  const args = params.getAll('arg')
  if (args.length === 0) {
    if (required) throw new ApiError(400, 'argument "topic" is required', 1)
    return null
  }
  if (args.length > 1) throw new ApiError(400, `expected 1 argument "topic", got ${args.length}`, 1)
  const bytes = fromMultibase(args[0])
  if (bytes.length === 0) throw new ApiError(500, 'topic must not be empty')
  if (bytes.length > MAX_TOPIC_BYTES) throw new ApiError(500, `topic is ${bytes.length} bytes, this node takes at most ${MAX_TOPIC_BYTES}`)
  try {
    return utf8.decode(bytes)
  } catch {
    throw new ApiError(500, 'topic is not valid UTF-8: this node takes text topics only')
  }
}

function seqnoBytes (n) {
  const out = Buffer.alloc(8)
  out.writeBigUInt64BE(BigInt.asUintN(64, n))
  return out
}

/** A gossipsub message in Kubo's pubsub/sub shape. */
function kuboMessage (msg) {
  return {
    from: msg.from.toString(),
    data: multibase(msg.data),
    seqno: multibase(seqnoBytes(msg.sequenceNumber)),
    topicIDs: [multibase(Buffer.from(msg.topic, 'utf8'))]
  }
}

/** Read the single multipart part of a pub request into one Buffer, at most `limit` bytes. */
async function readData (req, limit) {
  const ctype = req.headers['content-type'] ?? ''
  if (!ctype.toLowerCase().startsWith('multipart/form-data')) throw new ApiError(400, 'file argument \'data\' is required', 1)
  let data = null
  try {
    for await (const part of parseMultipart(req, boundaryOf(ctype))) {
      if (data != null) throw new ApiError(400, 'expected 1 file argument \'data\', got more', 1)
      const chunks = []
      let size = 0
      for await (const chunk of part.body) {
        size += chunk.length
        if (size > limit) throw new ApiError(500, `message data is over ${limit} bytes: this node publishes at most ${limit} bytes per message`)
        chunks.push(chunk)
      }
      data = Buffer.concat(chunks)
    }
  } catch (err) {
    throw err instanceof MultipartError ? new ApiError(400, err.message, 1) : err
  }
  if (data == null) throw new ApiError(400, 'file argument \'data\' is required', 1)
  return data
}

export class PubsubApi {
  /** @param {object} libp2p - from startSwarm() */
  constructor (libp2p) {
    this.libp2p = libp2p
    this.pubsub = libp2p.services.pubsub
    this.subscribers = new Map() // topic -> number of open /pubsub/sub streams
  }

  /** Routes to merge into KuboApi's table. */
  routes () {
    return {
      '/api/v0/pubsub/pub': (req, res, p) => this.pub(req, res, p),
      '/api/v0/pubsub/sub': (req, res, p) => this.sub(req, res, p),
      '/api/v0/pubsub/ls': (req, res, p) => this.ls(req, res, p),
      '/api/v0/pubsub/peers': (req, res, p) => this.peers(req, res, p),
      '/api/v0/swarm/connect': (req, res, p) => this.connect(req, res, p),
      '/api/v0/swarm/peers': (req, res, p) => this.swarmPeers(req, res, p)
    }
  }

  async pub (req, res, params) {
    const topic = topicArg(params)
    let data
    try {
      data = await readData(req, MAX_MESSAGE_BYTES)
    } catch (err) {
      req.resume() // discard the rest of the upload so that the client reads the error
      throw err
    }
    try {
      await this.pubsub.publish(topic, data)
    } catch (err) {
      throw new ApiError(500, `cannot publish to ${JSON.stringify(topic)}: ${err.message}`)
    }
    res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': 0, 'Cache-Control': 'no-cache' })
    res.end()
  }

  async sub (req, res, params) {
    const topic = topicArg(params)
    let dropped = 0
    const onMessage = (evt) => {
      const msg = evt.detail
      if (msg.topic !== topic || msg.type !== 'signed') return
      if (res.writableLength > MAX_BUFFERED_BYTES) {
        if (dropped++ % 100 === 0) console.error(`ipfs node: pubsub subscriber of ${JSON.stringify(topic)} too slow, ${dropped} message(s) dropped`)
        return
      }
      res.write(JSON.stringify(kuboMessage(msg)) + '\n')
    }
    this.pubsub.addEventListener('message', onMessage)
    this.subscribers.set(topic, (this.subscribers.get(topic) ?? 0) + 1)
    if (this.subscribers.get(topic) === 1) this.pubsub.subscribe(topic)
    try {
      res.writeHead(200, {
        'Content-Type': 'application/json',
        'X-Chunked-Output': '1',
        Trailer: 'X-Stream-Error',
        'Cache-Control': 'no-cache'
      })
      res.flushHeaders()
      await new Promise(resolve => {
        if (res.destroyed || res.socket == null || res.socket.destroyed) { resolve(); return }
        res.once('close', resolve)
      })
    } finally {
      this.pubsub.removeEventListener('message', onMessage)
      const left = (this.subscribers.get(topic) ?? 1) - 1
      if (left > 0) {
        this.subscribers.set(topic, left)
      } else {
        this.subscribers.delete(topic)
        this.pubsub.unsubscribe(topic)
      }
    }
  }

  async ls (req, res) {
    sendJson(res, 200, { Strings: this.pubsub.getTopics().map(t => multibase(Buffer.from(t, 'utf8'))) })
  }

  async peers (req, res, params) {
    const topic = topicArg(params, false)
    const peers = topic == null ? this.pubsub.getPeers() : this.pubsub.getSubscribers(topic)
    sendJson(res, 200, { Strings: peers.map(p => p.toString()).sort() })
  }

  async connect (req, res, params) {
    const out = []
    for (const arg of requiredArgs(params, 'address')) {
      let addr
      try {
        addr = multiaddr(arg)
      } catch (err) {
        throw new ApiError(500, `invalid peer address: ${err.message}`)
      }
      const peer = addr.getComponents().findLast(c => c.name === 'p2p')?.value
      if (peer == null) throw new ApiError(500, `invalid peer address: ${arg} has no /p2p/<peer id>`)
      if (peer === this.libp2p.peerId.toString()) throw new ApiError(500, `connect ${peer} failure: cannot connect to self`)
      try {
        await this.libp2p.dial(addr, { signal: AbortSignal.timeout(DIAL_TIMEOUT_MS) })
      } catch (err) {
        throw new ApiError(500, `connect ${peer} failure: ${err.message}`)
      }
      out.push(`connect ${peer} success`)
    }
    sendJson(res, 200, { Strings: out })
  }

  async swarmPeers (req, res) {
    const peers = this.libp2p.getConnections()
      .filter(c => c.status === 'open')
      .map(c => ({ Addr: c.remoteAddr.decapsulateCode(421).toString(), Peer: c.remotePeer.toString() }))
      .sort((a, b) => a.Peer.localeCompare(b.Peer))
    sendJson(res, 200, { Peers: peers })
  }
}
