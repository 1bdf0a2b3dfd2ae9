/**
 * Remote references moved node to node (docs/protocol.md, _Remote references_): the node holding a
 * reference serves it over the cluster network (`skyward.refs:serve` starts its peer server, once)
 * and the node that needs it fetches it from there (`skyward.refs:pull`), so its bytes never cross
 * the client's link. The client only tells the fetching node where the reference lives, and counts
 * what each node served and fetched (as the workers' answers report it) for `pool.traffic()`.
 */
import { type PendingTask, python } from "./python-function.js";

/** What moving references needs from its pool (part of `RemoteRefHost`). */
export interface PeerMovesHost {
  /** Runs a call on a node (`pool.run` with a target). */
  run(pending: PendingTask<unknown>, node: number, signal?: AbortSignal): Promise<unknown>;
  /** Reports something that went wrong without failing a call (an `error` event). */
  notice?(message: string, node: number): void;
}

/** Where a node's peer server listens (its cluster address). */
interface PeerAddress {
  readonly addr: string;
  readonly port: number;
}

/** Bytes one node moved to and from its peers for remote references. */
export interface PeerBytes {
  /** Bytes of references it served to other nodes. */
  served: number;
  /** Bytes of references it fetched from other nodes. */
  fetched: number;
}

const servePeers = python<[], PeerAddress>("skyward.refs:serve");
const pullRef = python<[request: { id: string; addr: string; port: number }], { bytes: number }>(
  "skyward.refs:pull",
);

/** One pool's moves of references between its nodes. */
export class PeerMoves {
  readonly #host: PeerMovesHost;
  /** Each node's peer server, asked for once (dropped when the ask failed or the node is lost). */
  readonly #servers = new Map<number, Promise<PeerAddress>>();
  readonly #bytes = new Map<number, PeerBytes>();

  constructor(host: PeerMovesHost) {
    this.#host = host;
  }

  /**
   * Moves reference `id` from node `from` to node `to`, node to node. Resolves `true` once `to` keeps
   * it, `false` when it could not (the peer unreachable, its server refused): the pool then says so
   * in an `error` event and the caller carries the reference through the client instead.
   */
  async move(id: string, from: number, to: number): Promise<boolean> {
    try {
      const address = await this.#server(from);
      const { bytes } = (await this.#host.run(pullRef({ id, ...address }), to)) as { bytes: number };
      this.#count(from).served += bytes;
      this.#count(to).fetched += bytes;
      return true;
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      this.#host.notice?.(
        `remote reference ${id} could not move from node ${from} to node ${to} directly (${reason}): it goes through the client instead`,
        to,
      );
      return false;
    }
  }

  /** What node `node` served to and fetched from its peers so far. */
  bytes(node: number): PeerBytes {
    const counted = this.#bytes.get(node);
    return { served: counted?.served ?? 0, fetched: counted?.fetched ?? 0 };
  }

  /** A node was lost: its server went with it (a replacement starts its own). */
  nodeLost(node: number): void {
    this.#servers.delete(node);
  }

  #server(node: number): Promise<PeerAddress> {
    let server = this.#servers.get(node);
    if (server === undefined) {
      server = this.#host.run(servePeers(), node) as Promise<PeerAddress>;
      this.#servers.set(node, server);
      const asked = server;
      asked.catch(() => {
        if (this.#servers.get(node) === asked) this.#servers.delete(node);
      });
    }
    return server;
  }

  #count(node: number): PeerBytes {
    let counted = this.#bytes.get(node);
    if (counted === undefined) {
      counted = { served: 0, fetched: 0 };
      this.#bytes.set(node, counted);
    }
    return counted;
  }
}
