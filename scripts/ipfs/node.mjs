#!/usr/bin/env node
/**
 * The local IPFS node of tenzro-train: Helia on a filesystem blockstore and a
 * libp2p swarm (bitswap and gossipsub), serving the Kubo RPC subset the
 * project uses.
 *
 *   node_modules/node/bin/node scripts/ipfs/node.mjs --repo <data dir> --api 127.0.0.1:<port>
 *       [--swarm 127.0.0.1:<port>] [--max-fetch-bytes <bytes>]
 *
 * --swarm is the libp2p TCP listen address (default 127.0.0.1:0, a free port
 * chosen at start; `/api/v0/id` and the ready line give the address to dial).
 * Nothing is dialled on its own: no bootstrap peers, no mDNS, no DHT; two
 * nodes meet through `/api/v0/swarm/connect <multiaddr>`. Blocks move between
 * connected nodes over bitswap: a `cat`, `pin/add` or `block/stat` of a block
 * this node lacks asks its connected peers for it (no peer connected, or
 * `offline=true`: fails at once), under the request's Kubo `timeout` option or
 * a 60 s default, and at most --max-fetch-bytes (default 1 GiB + 16 MiB) from
 * peers per request (a `cat`'s `length` bounds it further); fetched blocks are stored, verified against
 * their CID, and pinned only when pinned explicitly (fetch.mjs). Any
 * connected peer may fetch any block this node holds.
 *
 * Prints `ipfs node ready api=http://<host>:<port> peer=<id> swarm=<multiaddr>`
 * on stdout once it answers; serves until SIGTERM/SIGINT, then closes the
 * swarm and the stores and exits 0. Exits 2 with a message on stderr when the
 * arguments are wrong, the repo is unusable (not writable, locked by a live
 * node) or a port is taken.
 *
 * Pubsub (gossipsub, Kubo RPC /api/v0/pubsub/{pub,sub,ls,peers}, see
 * pubsub.mjs): topics and data are multibase base64url (`u...`) on the wire
 * as in Kubo. The topics tenzro-train uses (names from the Tenzro Train docs,
 * one of each per task; the task id is the bytes32 as 64 lowercase hex digits
 * without 0x):
 *   tenzro/training/1.0.0/<task id hex>          signed trainer submissions
 *   tenzro/training/syncer/1.0.0/<task id hex>   syncer announcements
 *   tenzro/training/nodes/1.0.0/<task id hex>    the parties' node addresses
 * (constants and helpers in operator/tenzro_operator/ipfs/pubsub.py). A message
 * carries at most 1 MiB of data.
 */
import http from 'node:http'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { openRepo, RepoError } from './repo.mjs'
import { KuboApi } from './api.mjs'
import { PubsubApi } from './pubsub.mjs'
import { startSwarm, SwarmError } from './swarm.mjs'
import { MAX_FETCH_BYTES } from './fetch.mjs'

const NODE_VERSION = '0.1.0'

function fail (message) {
  process.stderr.write(`ipfs node: ${message}\n`)
  process.exit(2)
}

function parseArgs (argv) {
  const out = { repo: null, api: '127.0.0.1:5001', swarm: '127.0.0.1:0', 'max-fetch-bytes': String(MAX_FETCH_BYTES) }
  const usage = 'usage: node scripts/ipfs/node.mjs --repo <data dir> --api 127.0.0.1:<port> [--swarm 127.0.0.1:<port>] [--max-fetch-bytes <bytes>]'
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    const [flag, inline] = a.includes('=') ? [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)] : [a, null]
    if (flag === '--help' || flag === '-h') {
      process.stdout.write(usage + '\n')
      process.exit(0)
    }
    if (!['--repo', '--api', '--swarm', '--max-fetch-bytes'].includes(flag)) fail(`unknown argument ${a} (${usage})`)
    const value = inline ?? argv[++i]
    if (value == null || value === '') fail(`${flag} needs a value`)
    out[flag.slice(2)] = value
  }
  if (out.repo == null) fail('--repo <data dir> is required')
  const hostPort = (flag, value) => {
    const m = /^(.+):(\d+)$/.exec(value)
    if (m == null || Number(m[2]) > 65535) fail(`${flag} must be <host>:<port>, got ${value}`)
    return [m[1].replace(/^\[|\]$/g, ''), Number(m[2])]
  }
  ;[out.host, out.port] = hostPort('--api', out.api)
  ;[out.swarmHost, out.swarmPort] = hostPort('--swarm', out.swarm)
  if (!/^\d+$/.test(out['max-fetch-bytes']) || !Number.isSafeInteger(Number(out['max-fetch-bytes'])) || Number(out['max-fetch-bytes']) === 0) {
    fail(`--max-fetch-bytes must be a positive whole number of bytes, got ${out['max-fetch-bytes']}`)
  }
  out.maxFetchBytes = Number(out['max-fetch-bytes'])
  return out
}

function packageVersion (name) {
  try {
    const here = path.dirname(fileURLToPath(import.meta.url))
    return JSON.parse(fs.readFileSync(path.join(here, '..', '..', 'node_modules', name, 'package.json'), 'utf8')).version
  } catch {
    return 'unknown'
  }
}

async function main () {
  const args = parseArgs(process.argv.slice(2))
  const heliaVersion = packageVersion('helia')
  const agentVersion = `tenzro-ipfs/${NODE_VERSION} helia/${heliaVersion}`
  let node
  try {
    node = await openRepo(args.repo, {
      swarm: (privateKey) => startSwarm({ privateKey, host: args.swarmHost, port: args.swarmPort, agentVersion })
    })
  } catch (err) {
    if (err instanceof RepoError || err instanceof SwarmError) fail(err.message)
    fail(`cannot open repo ${args.repo}: ${err.message}`)
  }
  const swarm = node.libp2p
  const pubsub = new PubsubApi(swarm)
  const api = new KuboApi(node, { version: `${NODE_VERSION}-helia`, heliaVersion, agentVersion }, swarm, pubsub.routes(),
    { maxFetchBytes: args.maxFetchBytes })
  const server = http.createServer((req, res) => { api.handle(req, res) })
  server.requestTimeout = 0 // large uploads
  server.keepAliveTimeout = 5000

  let closing = false
  const shutdown = async (signal) => {
    if (closing) return
    closing = true
    process.stderr.write(`ipfs node: ${signal}, closing\n`)
    server.close()
    server.closeAllConnections()
    try {
      await node.close() // bitswap, then the swarm, then the stores
    } catch (err) {
      process.stderr.write(`ipfs node: error while closing the repo: ${err.message}\n`)
      process.exit(1)
    }
    process.exit(0)
  }
  process.on('SIGTERM', () => { shutdown('SIGTERM') })
  process.on('SIGINT', () => { shutdown('SIGINT') })

  server.on('error', async (err) => {
    const why = err.code === 'EADDRINUSE'
      ? `port ${args.port} on ${args.host} is already in use (another IPFS node or Kubo daemon?)`
      : `cannot listen on ${args.host}:${args.port}: ${err.message}`
    try { await node.close() } catch { /* exiting anyway */ }
    fail(why)
  })
  server.listen(args.port, args.host, () => {
    const { port } = server.address()
    const host = args.host.includes(':') ? `[${args.host}]` : args.host
    const swarmAddr = swarm.getMultiaddrs()[0]?.toString() ?? ''
    process.stdout.write(`ipfs node ready api=http://${host}:${port} peer=${node.peerId.toString()} swarm=${swarmAddr}\n`)
  })
}

main().catch((err) => fail(err.stack ?? String(err)))
