/**
 * Streaming multipart/form-data parser (RFC 7578) for the `add` endpoint.
 *
 * Kubo's RPC clients upload files as multipart parts named `file`; a part's
 * body may be large (model weights), so it is handed out as an async
 * iterable of Uint8Array chunks instead of being buffered whole.
 */

const CRLF = Buffer.from('\r\n')
const HEADER_END = Buffer.from('\r\n\r\n')
const MAX_HEADER_BYTES = 16 * 1024

export class MultipartError extends Error {
  constructor (message) {
    super(message)
    this.name = 'MultipartError'
  }
}

/** Boundary from a Content-Type header, or throws MultipartError. */
export function boundaryOf (contentType) {
  const match = /^multipart\/form-data\s*;.*\bboundary=(?:"([^"]+)"|([^\s;]+))/i.exec(contentType ?? '')
  if (match == null) {
    throw new MultipartError(`expected a multipart/form-data body with a boundary, got Content-Type ${JSON.stringify(contentType ?? '')}`)
  }
  return match[1] ?? match[2]
}

/**
 * Parse a multipart body.
 *
 * @param {AsyncIterable<Uint8Array>} source - the request body
 * @param {string} boundary - from boundaryOf()
 * @yields {{headers: Record<string,string>, name: string|null, filename: string|null, body: AsyncIterable<Buffer>}}
 *   one per part, in order; a part's body must be consumed (or drained)
 *   before the next part is requested.
 */
export async function * parseMultipart (source, boundary) {
  const iterator = source[Symbol.asyncIterator]()
  const delimiter = Buffer.from(`\r\n--${boundary}`)
  // The first boundary has no CRLF before it: pretend it does.
  let buf = Buffer.from(CRLF)
  let eof = false

  async function fill () {
    if (eof) return false
    const { value, done } = await iterator.next()
    if (done) { eof = true; return false }
    buf = buf.length === 0 ? Buffer.from(value) : Buffer.concat([buf, value])
    return true
  }

  async function need (n) {
    while (buf.length < n) {
      if (!(await fill())) throw new MultipartError('multipart body ended early')
    }
  }

  // Skip the preamble up to the first delimiter.
  while (true) {
    const idx = buf.indexOf(delimiter)
    if (idx >= 0) { buf = buf.subarray(idx + delimiter.length); break }
    if (buf.length > delimiter.length) buf = buf.subarray(buf.length - delimiter.length)
    if (!(await fill())) throw new MultipartError('multipart body has no boundary')
  }

  while (true) {
    await need(2)
    if (buf[0] === 0x2d && buf[1] === 0x2d) return // "--": closing delimiter
    // Transport padding then CRLF, then the part headers.
    let headerEnd
    while ((headerEnd = buf.indexOf(HEADER_END)) < 0) {
      if (buf.length > MAX_HEADER_BYTES) throw new MultipartError('multipart part headers too long')
      if (!(await fill())) throw new MultipartError('multipart body ended in part headers')
    }
    const headerText = buf.subarray(0, headerEnd).toString('utf8')
    buf = buf.subarray(headerEnd + HEADER_END.length)
    const headers = {}
    for (const line of headerText.split('\r\n')) {
      const colon = line.indexOf(':')
      if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
    }
    const disposition = headers['content-disposition'] ?? ''
    const name = /\bname="([^"]*)"/i.exec(disposition)?.[1] ?? null
    const filenameRaw = /\bfilename="([^"]*)"/i.exec(disposition)?.[1] ?? null
    let filename = filenameRaw
    if (filenameRaw != null) {
      try { filename = decodeURIComponent(filenameRaw) } catch { filename = filenameRaw }
    }

    let finished = false
    const body = (async function * () {
      while (true) {
        const idx = buf.indexOf(delimiter)
        if (idx >= 0) {
          if (idx > 0) yield buf.subarray(0, idx)
          buf = buf.subarray(idx + delimiter.length)
          finished = true
          return
        }
        // Keep a tail that might be the start of a delimiter.
        const safe = buf.length - (delimiter.length - 1)
        if (safe > 0) {
          const out = buf.subarray(0, safe)
          buf = buf.subarray(safe)
          yield out
        }
        if (!(await fill())) throw new MultipartError('multipart body ended inside a part')
      }
    })()

    yield { headers, name, filename, body }
    if (!finished) {
      for await (const _ of body) { /* drain what the consumer left */ }
    }
  }
}
