/**
 * Answers of TensorDock's v2 API (`https://dashboard.tensordock.com/api/v2`) as its documentation shows
 * them; each constant names the page its shape comes from. Values (cities, prices) are examples in
 * those shapes.
 */

/**
 * `GET /api/v2/locations`: `{data: {locations: [{id, city, stateprovince, country, tier, gpus: [{v0Name,
 * displayName, max_count, price_per_hr, resources: {max_vcpus, max_ram_gb, max_storage_gb}, pricing:
 * {per_vcpu_hr, per_gb_ram_hr, per_gb_storage_hr}, network_features: {dedicated_ip_available,
 * port_forwarding_available, network_storage_available}}]}]}}`.
 * https://dashboard.tensordock.com/api/docs/fetch-hostnodes
 */
export const locations = [
  {
    id: "1f7b3a52-6c1e-4b5e-9a51-0c2a4b0d8e11",
    city: "Austin",
    stateprovince: "Texas",
    country: "United States",
    tier: 3,
    gpus: [
      gpu("h100-sxm5-80gb", "H100 SXM5 80GB", 8, 2.2, {
        max_vcpus: 128,
        max_ram_gb: 300,
        max_storage_gb: 1000,
      }),
      gpu("geforcertx4090-pcie-24gb", "GeForce RTX 4090 PCIe 24GB", 4, 0.35, {
        max_vcpus: 32,
        max_ram_gb: 128,
        max_storage_gb: 2000,
      }),
    ],
  },
  {
    id: "8a0c4e2d-2f3b-4d7a-b1c9-5e6f7a8b9c02",
    city: "Frankfurt",
    stateprovince: "Hesse",
    country: "Germany",
    tier: 3,
    gpus: [
      gpu("geforcertx4090-pcie-24gb", "GeForce RTX 4090 PCIe 24GB", 2, 0.4, {
        max_vcpus: 16,
        max_ram_gb: 64,
        max_storage_gb: 1000,
      }),
      gpu("a100-pcie-80gb", "A100 PCIe 80GB", 1, 1.2, {
        max_vcpus: 16,
        max_ram_gb: 96,
        max_storage_gb: 1000,
      }),
      // An H100 PCIe beside Austin's H100 SXM5, for the form-factor tests.
      gpu("h100-pcie-80gb", "H100 PCIe 80GB", 1, 1.9, {
        max_vcpus: 16,
        max_ram_gb: 128,
        max_storage_gb: 1000,
      }),
    ],
  },
  {
    id: "c3d9e8f7-1a2b-4c5d-8e9f-0a1b2c3d4e05",
    city: "Osaka",
    stateprovince: "Osaka",
    country: "Japan",
    tier: 2,
    // No dedicated IP here: not offered (Skyward reaches VMs on port 22 of their own address).
    gpus: [
      {
        ...gpu("geforcertx4090-pcie-24gb", "GeForce RTX 4090 PCIe 24GB", 4, 0.3, {
          max_vcpus: 32,
          max_ram_gb: 128,
          max_storage_gb: 1000,
        }),
        network_features: {
          dedicated_ip_available: false,
          port_forwarding_available: true,
          network_storage_available: false,
        },
      },
    ],
  },
];

function gpu(
  v0Name: string,
  displayName: string,
  maxCount: number,
  pricePerHour: number,
  resources: { max_vcpus: number; max_ram_gb: number; max_storage_gb: number },
) {
  return {
    v0Name,
    displayName,
    max_count: maxCount,
    price_per_hr: pricePerHour,
    resources,
    pricing: { per_vcpu_hr: 0.003, per_gb_ram_hr: 0.002, per_gb_storage_hr: 0.00005 },
    network_features: {
      dedicated_ip_available: true,
      port_forwarding_available: true,
      network_storage_available: false,
    },
  };
}

/**
 * Error answers: JSON:API error objects, `{errors: [{status, title, detail}]}`.
 * https://dashboard.tensordock.com/api/docs/getting-started
 */
export const errors = {
  unauthorized: {
    errors: [{ status: "401", title: "Unauthorized", detail: "Invalid or missing API token" }],
  },
  notFound: { errors: [{ status: "404", title: "Not Found", detail: "Instance not found" }] },
  rateLimited: {
    errors: [
      { status: "429", title: "Too Many Requests", detail: "Rate limit exceeded: 100 requests per minute" },
    ],
  },
  noCapacity: (what: string) => ({
    errors: [
      { status: "400", title: "Bad Request", detail: `No available hostnode with ${what} at this location` },
    ],
  }),
  badRequest: (detail: string) => ({ errors: [{ status: "400", title: "Bad Request", detail }] }),
};
