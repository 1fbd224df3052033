#!/usr/bin/env node
/**
 * The local IPFS node of tenzro-train: Helia on a filesystem blockstore,
 * no networking, serving the Kubo RPC subset the project uses.
 *
 *   node_modules/node/bin/node scripts/ipfs/node.mjs --repo <data dir> --api 127.0.0.1:<port>
 *
 * Prints `ipfs node ready api=http://<host>:<port> peer=<id>` on stdout once
 * it answers; serves until SIGTERM/SIGINT, then closes the stores and exits 0.
 * Exits 2 with a message on stderr when the arguments are wrong, the repo is
 * unusable (not writable, locked by a live node) or the port is taken.
 */
import http from 'node:http'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { openRepo, RepoError } from './repo.mjs'
import { KuboApi } from './api.mjs'

const NODE_VERSION = '0.1.0'

function fail (message) {
  process.stderr.write(`ipfs node: ${message}\n`)
  process.exit(2)
}

function parseArgs (argv) {
  const out = { repo: null, api: '127.0.0.1:5001' }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    const [flag, inline] = a.includes('=') ? [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)] : [a, null]
    if (flag === '--help' || flag === '-h') {
      process.stdout.write('usage: node scripts/ipfs/node.mjs --repo <data dir> --api 127.0.0.1:<port>\n')
      process.exit(0)
    }
    if (flag !== '--repo' && flag !== '--api') fail(`unknown argument ${a} (usage: --repo <data dir> --api 127.0.0.1:<port>)`)
    const value = inline ?? argv[++i]
    if (value == null || value === '') fail(`${flag} needs a value`)
    out[flag.slice(2)] = value
  }
  if (out.repo == null) fail('--repo <data dir> is required')
  const m = /^(.+):(\d+)$/.exec(out.api)
  if (m == null || Number(m[2]) > 65535) fail(`--api must be <host>:<port>, got ${out.api}`)
  out.host = m[1].replace(/^\[|\]$/g, '')
  out.port = Number(m[2])
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
  let node
  try {
    node = await openRepo(args.repo)
  } catch (err) {
    fail(err instanceof RepoError ? err.message : `cannot open repo ${args.repo}: ${err.message}`)
  }
  const heliaVersion = packageVersion('helia')
  const api = new KuboApi(node, {
    version: `${NODE_VERSION}-helia`,
    heliaVersion,
    agentVersion: `tenzro-ipfs/${NODE_VERSION} helia/${heliaVersion} (local, offline)`
  })
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
      await node.close()
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
    process.stdout.write(`ipfs node ready api=http://${host}:${port} peer=${node.peerId.toString()}\n`)
  })
}

main().catch((err) => fail(err.stack ?? String(err)))
