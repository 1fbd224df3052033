/**
 * The node's libp2p swarm: TCP, noise, yamux, identify and gossipsub, with
 * the node's own identity key (so `/api/v0/id` names one peer). Helia's
 * bitswap (repo.mjs) runs on it too: blocks travel between connected nodes.
 *
 * No discovery by design: no bootstrap list, no mDNS, no DHT, no relay, no
 * autodial. A peer is reached only by `/api/v0/swarm/connect <multiaddr>`.
 *
 * Gossipsub settings, as Kubo's go-libp2p-pubsub where it matters:
 *   - StrictSign: every message carries from, seqno, signature and key.
 *   - emitSelf: a node's own subscribers receive what it publishes (Kubo
 *     delivers local publications to local subscriptions too), so processes
 *     sharing one node talk through it without a second node.
 *   - allowPublishToZeroTopicPeers: publishing with nobody subscribed is not
 *     an error (Kubo's pub returns 200 then too).
 *   - messages of at most MAX_MESSAGE_BYTES of data are published; inbound
 *     RPC frames above MAX_MESSAGE_BYTES + 64 KiB are dropped unread.
 */
import { createLibp2p } from 'libp2p'
import { tcp } from '@libp2p/tcp'
import { noise } from '@libp2p/noise'
import { yamux } from '@libp2p/yamux'
import { identify } from '@libp2p/identify'
import { gossipsub } from '@libp2p/gossipsub'

/** bytes: largest `data` of one pubsub message (go-libp2p-pubsub's DefaultMaxMessageSize, 1 MiB). */
export const MAX_MESSAGE_BYTES = 1 << 20
const FRAME_OVERHEAD_BYTES = 64 * 1024 // from, seqno, signature, key, topic and protobuf framing

export class SwarmError extends Error {
  constructor (message) {
    super(message)
    this.name = 'SwarmError'
  }
}

/**
 * Start a libp2p node listening on TCP `host:port` (port 0: any free port).
 * @param {{privateKey: object, host: string, port: number, agentVersion: string}} opts
 * @returns {Promise<object>} the started libp2p node; `node.services.pubsub` is gossipsub
 * @throws SwarmError when the address cannot be listened on
 */
export async function startSwarm ({ privateKey, host, port, agentVersion }) {
  const family = host.includes(':') ? 'ip6' : 'ip4'
  try {
    return await createLibp2p({
      privateKey,
      addresses: { listen: [`/${family}/${host}/tcp/${port}`] },
      transports: [tcp()],
      connectionEncrypters: [noise()],
      streamMuxers: [yamux()],
      peerDiscovery: [],
      nodeInfo: { userAgent: agentVersion },
      services: {
        identify: identify(),
        pubsub: gossipsub({
          emitSelf: true,
          allowPublishToZeroTopicPeers: true,
          ignoreDuplicatePublishError: false,
          fallbackToFloodsub: false,
          maxInboundDataLength: MAX_MESSAGE_BYTES + FRAME_OVERHEAD_BYTES
        })
      }
    })
  } catch (err) {
    const why = err?.code === 'EADDRINUSE' || /EADDRINUSE/.test(err?.message ?? '')
      ? `swarm port ${port} on ${host} is already in use`
      : `cannot start the libp2p swarm on ${host}:${port}: ${err?.message ?? err}`
    throw new SwarmError(why)
  }
}
