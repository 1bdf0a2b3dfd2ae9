import { createServer, type Server } from "node:net";
import { describe, expect, it } from "vitest";
import { freeLoopbackPort } from "./ports.js";

const listen = (port: number) =>
  new Promise<Server>((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve(server));
  });

describe("freeLoopbackPort", () => {
  it("finds a pair of free loopback ports below the ephemeral range, both of which can be listened on", async () => {
    for (let round = 0; round < 5; round += 1) {
      const port = await freeLoopbackPort();
      expect(port).toBeGreaterThanOrEqual(20_000);
      expect(port).toBeLessThan(32_768);
      const servers = await Promise.all([listen(port), listen(port + 1)]);
      await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
    }
  });
});
