/**
 * One way for the test bed's fake HTTP services (the cloud APIs' fakes, the instance metadata
 * servers) to start listening on a free port and to stop: the closing ends kept-alive connections,
 * so a client's idle socket never holds a test's teardown up.
 */
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";

/** A listening server: its base URL (`http://host:port`) and the way to close it. */
export interface Listening {
  readonly url: string;
  readonly close: () => Promise<void>;
}

/** Listens on a free port of `host` (loopback unless given) and resolves once it does. */
export async function listenOnFreePort(server: Server, host = "127.0.0.1"): Promise<Listening> {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return { url: `http://${address.address}:${address.port}`, close };
}
