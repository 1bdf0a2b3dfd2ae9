/**
 * A typed JSON client of an API that takes a short-lived bearer token instead of a fixed key (Verda's
 * OAuth 2.0 client-credentials token): the token is asked for on the first call, shared by the calls
 * made together, renewed a minute before it lapses, and renewed once when the API refuses it (a token
 * revoked early). The provider writes only how a token is obtained.
 */
import type { ProviderHttpSettings } from "../http/provider-http.js";
import type { MachineApi, MachineJsonClient } from "./machine-api.js";

/** A token as the API granted it. */
export interface GrantedToken {
  readonly token: string;
  /** Seconds it is valid for; default an hour. */
  readonly expiresInSeconds?: number | undefined;
}

/** A {@link MachineJsonClient} of `api` at `settings.apiUrl`, each call carrying a token from `grant`. */
export function tokenClient(
  api: MachineApi,
  settings: ProviderHttpSettings & { readonly apiUrl: string },
  grant: (signal: AbortSignal) => Promise<GrantedToken>,
): MachineJsonClient {
  let current: { client: MachineJsonClient; expiresAt: number } | undefined;
  let pending: Promise<MachineJsonClient> | undefined;

  async function renew(signal: AbortSignal): Promise<MachineJsonClient> {
    const { token, expiresInSeconds } = await grant(signal);
    const client = api.jsonClient({ ...settings, apiKey: token });
    // Renewed a minute early, so a request never goes out with a token about to lapse.
    current = { client, expiresAt: Date.now() + Math.max((expiresInSeconds ?? 3600) - 60, 30) * 1000 };
    return client;
  }

  /** The valid token's client, asking for one when there is none (calls made together share the request). */
  function valid(signal: AbortSignal): Promise<MachineJsonClient> {
    if (current && current.expiresAt > Date.now()) return Promise.resolve(current.client);
    pending ??= renew(signal).finally(() => {
      pending = undefined;
    });
    return pending;
  }

  async function withToken<T>(signal: AbortSignal, use: (client: MachineJsonClient) => Promise<T>) {
    for (let attempt = 0; ; attempt += 1) {
      const client = await valid(signal);
      try {
        return await use(client);
      } catch (error) {
        if (attempt > 0 || !api.ApiError.isInstance(error) || error.statusCode !== 401) throw error;
        if (current?.client === client) current = undefined;
      }
    }
  }

  return {
    http: {
      scrub: (text) => current?.client.http.scrub(text) ?? text,
      send: (endpoint, request) => withToken(request.signal, (client) => client.http.send(endpoint, request)),
    },
    json: (method, path, options) =>
      withToken(options.signal, (client) => client.json(method, path, options)),
    call: (endpoint, method, path, schema, purpose, signal, options) =>
      withToken(signal, (client) => client.call(endpoint, method, path, schema, purpose, signal, options)),
    read: (endpoint, path, schema, purpose, signal, params) =>
      withToken(signal, (client) => client.read(endpoint, path, schema, purpose, signal, params)),
    remove: (endpoint, path, purpose, signal) =>
      withToken(signal, (client) => client.remove(endpoint, path, purpose, signal)),
  };
}
