/**
 * The on-disk repository of the local IPFS node and the Helia instance on it.
 *
 * Layout under the data dir:
 *   blocks/        FsBlockstore (one file per block)
 *   datastore/     FsDatastore (Helia's pins, datastore version)
 *   identity.key   the node's Ed25519 private key (libp2p protobuf), mode 0600
 *   repo.lock      pid of the node that holds the repo
 *
 * Helia is built with createHeliaLight: no libp2p, no routers, no block
 * brokers, so nothing ever goes to the network and a block that is not on
 * disk fails at once.
 */
import fs from 'node:fs'
import path from 'node:path'
import { createHeliaLight } from 'helia'
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
 * Open (creating if needed) the repo at `repoDir` and start Helia on it.
 * @returns {Promise<{helia, privateKey, peerId, close: () => Promise<void>}>}
 * @throws RepoError when the dir cannot be created/written, is locked by a
 *   live node, or holds an unreadable key or datastore.
 */
export async function openRepo (repoDir) {
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
  try {
    const privateKey = await loadIdentity(repoDir)
    const blockstore = new FsBlockstore(path.join(repoDir, 'blocks'))
    const datastore = new FsDatastore(path.join(repoDir, 'datastore'))
    await blockstore.open()
    await datastore.open()
    const helia = createHeliaLight({ blockstore, datastore })
    await helia.start()
    const close = async () => {
      try {
        await helia.stop()
        await blockstore.close()
        await datastore.close()
      } finally {
        releaseLock()
      }
    }
    return { helia, privateKey, peerId: peerIdFromPrivateKey(privateKey), close }
  } catch (err) {
    releaseLock()
    throw err instanceof RepoError ? err : new RepoError(`repo ${repoDir} is not usable: ${err.message}`)
  }
}
