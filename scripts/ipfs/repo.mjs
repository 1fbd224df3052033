/**
 * The on-disk repository of the local IPFS node and the Helia instance on it.
 *
 * Layout under the data dir:
 *   blocks/        FsBlockstore (one file per block)
 *   datastore/     FsDatastore (Helia's pins, datastore version)
 *   identity.key   the node's Ed25519 private key (libp2p protobuf), mode 0600
 *   repo.lock      pid of the node that holds the repo
 *
 * Helia is built with createHeliaLight (no routers, no DHT, no HTTP
 * gateways) on the node's own libp2p swarm (swarm.mjs) with one block broker,
 * bitswap (@helia/bitswap): a block that is not on disk is asked of the peers
 * the swarm is connected to, and this node serves its blocks to them. The
 * limits of one fetch (deadline, bytes) are fetch.mjs's.
 */
import fs from 'node:fs'
import path from 'node:path'
import { createHeliaLight } from 'helia'
import { withBitswap } from '@helia/bitswap'
import { FsBlockstore } from 'blockstore-fs'
import { FsDatastore } from 'datastore-fs'
import { generateKeyPair, privateKeyFromProtobuf, privateKeyToProtobuf } from '@libp2p/crypto/keys'
import { peerIdFromPrivateKey } from '@libp2p/peer-id'

export class RepoError extends Error {
  constructor (message) {
    super(message)
    this.name = 'RepoError'
  }
}

/**
 * mkdir -p without fs.mkdirSync's `recursive` option, which spins forever on
 * some paths (Node 22 under /proc).
 */
function ensureDir (dir) {
  if (fs.existsSync(dir)) return
  const parent = path.dirname(dir)
  if (parent !== dir) ensureDir(parent)
  try {
    fs.mkdirSync(dir)
  } catch (err) {
    if (err.code !== 'EEXIST') throw err
  }
}

function pidAlive (pid) {
  try { process.kill(pid, 0); return true } catch (err) { return err.code === 'EPERM' }
}

function acquireLock (repoDir) {
  const lockPath = path.join(repoDir, 'repo.lock')
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      fs.writeFileSync(lockPath, `${process.pid}\n`, { flag: 'wx' })
      return lockPath
    } catch (err) {
      if (err.code !== 'EEXIST') throw err
      const pid = parseInt(fs.readFileSync(lockPath, 'utf8'), 10)
      if (Number.isInteger(pid) && pid !== process.pid && pidAlive(pid)) {
        throw new RepoError(`repo ${repoDir} is in use by another IPFS node (pid ${pid}); stop it first`)
      }
      fs.rmSync(lockPath, { force: true }) // stale lock from a node that died
    }
  }
  throw new RepoError(`cannot take the lock ${lockPath}`)
}

async function loadIdentity (repoDir) {
  const keyPath = path.join(repoDir, 'identity.key')
  if (fs.existsSync(keyPath)) {
    try {
      return privateKeyFromProtobuf(fs.readFileSync(keyPath))
    } catch (err) {
      throw new RepoError(`identity key ${keyPath} is unreadable (${err.message}); move it away to make a new one`)
    }
  }
  const key = await generateKeyPair('Ed25519')
  fs.writeFileSync(keyPath, privateKeyToProtobuf(key), { mode: 0o600 })
  return key
}

/**
 * bytes: largest bitswap message taken from a peer (@helia/bitswap's default,
 * 4 MiB, as boxo's); a block larger than this cannot be fetched.
 */
export const BITSWAP_MAX_MESSAGE_BYTES = 4 * 1024 * 1024

/**
 * Open (creating if needed) the repo at `repoDir` and start Helia on it.
 * @param {string} repoDir
 * @param {{swarm?: (privateKey: object) => Promise<object>}} [opts] - `swarm`
 *   starts the libp2p node with the repo's identity key; with it Helia fetches
 *   missing blocks from connected peers over bitswap, without it Helia has no
 *   network at all (a missing block fails at once)
 * @returns {Promise<{helia, libp2p, privateKey, peerId, close: () => Promise<void>}>}
 *   `close` stops Helia (bitswap), then the swarm, then the stores
 * @throws RepoError when the dir cannot be created/written, is locked by a
 *   live node, or holds an unreadable key or datastore; whatever `swarm`
 *   throws (e.g. SwarmError) as it is
 */
export async function openRepo (repoDir, { swarm = null } = {}) {
  repoDir = path.resolve(repoDir)
  try {
    ensureDir(repoDir)
    fs.accessSync(repoDir, fs.constants.W_OK | fs.constants.R_OK)
  } catch (err) {
    throw new RepoError(`repo dir ${repoDir} is not usable: ${err.message}`)
  }
  if (!fs.statSync(repoDir).isDirectory()) throw new RepoError(`repo path ${repoDir} is not a directory`)
  let lockPath
  try {
    lockPath = acquireLock(repoDir)
  } catch (err) {
    throw err instanceof RepoError ? err : new RepoError(`repo dir ${repoDir}: ${err.message}`)
  }
  const releaseLock = () => {
    try {
      if (parseInt(fs.readFileSync(lockPath, 'utf8'), 10) === process.pid) fs.rmSync(lockPath, { force: true })
    } catch { /* already gone */ }
  }
  let blockstore = null
  let datastore = null
  let libp2p = null
  let swarmError = null
  try {
    const privateKey = await loadIdentity(repoDir)
    blockstore = new FsBlockstore(path.join(repoDir, 'blocks'))
    datastore = new FsDatastore(path.join(repoDir, 'datastore'))
    await blockstore.open()
    await datastore.open()
    const helia = createHeliaLight({ blockstore, datastore })
    if (swarm != null) {
      libp2p = await swarm(privateKey).catch((err) => { swarmError = err; throw err })
      // @helia/bitswap reads the swarm as `helia.libp2p` (what withLibp2p sets);
      // its broker is created when Helia starts.
      Object.defineProperty(helia, 'libp2p', { value: libp2p, enumerable: true })
      withBitswap(helia, { maxIncomingMessageSize: BITSWAP_MAX_MESSAGE_BYTES })
    }
    await helia.start()
    const close = async () => {
      try {
        await helia.stop()
        if (libp2p != null) await libp2p.stop()
        await blockstore.close()
        await datastore.close()
      } finally {
        releaseLock()
      }
    }
    return { helia, libp2p, privateKey, peerId: peerIdFromPrivateKey(privateKey), close }
  } catch (err) {
    try { await libp2p?.stop() } catch { /* failing anyway */ }
    try { await blockstore?.close() } catch { /* failing anyway */ }
    try { await datastore?.close() } catch { /* failing anyway */ }
    releaseLock()
    if (err instanceof RepoError || err === swarmError) throw err
    throw new RepoError(`repo ${repoDir} is not usable: ${err.message}`)
  }
}
