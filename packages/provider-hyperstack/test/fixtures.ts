/**
 * Answers of Hyperstack's Infrahub API (`https://infrahub-api.nexgencloud.com/v1`) as its documentation
 * shows them; each constant names the page its shape comes from. Values (names, prices) are examples in
 * those shapes.
 */

/**
 * `GET /core/flavors`: `{status, message, data: [{gpu, region_name, flavors: [Flavor_Fields]}]}`.
 * https://docs.hyperstack.cloud/docs/api-reference/list-flavors
 * https://docs.hyperstack.cloud/docs/api-reference/schemas/flavor-item-get-response
 * https://docs.hyperstack.cloud/docs/api-reference/schemas/flavor-fields
 */
export const flavorGroups = [
  {
    gpu: "A100-80G-PCIe",
    region_name: "CANADA-1",
    flavors: [
      flavor(
        101,
        "n3-A100x1",
        "CANADA-1",
        { cpu: 28, ram: 120, disk: 100, ephemeral: 750 },
        "A100-80G-PCIe",
        1,
      ),
      flavor(
        102,
        "n3-A100x2",
        "CANADA-1",
        { cpu: 60, ram: 240, disk: 100, ephemeral: 1500 },
        "A100-80G-PCIe",
        2,
      ),
      flavor(
        103,
        "n3-A100x8",
        "CANADA-1",
        { cpu: 252, ram: 960, disk: 100, ephemeral: 6500 },
        "A100-80G-PCIe",
        8,
        false,
      ),
    ],
  },
  {
    gpu: "A100-80G-PCIe-w-NVLink",
    region_name: "NORWAY-1",
    flavors: [
      flavor(
        201,
        "n3-A100x2-NVLink",
        "NORWAY-1",
        { cpu: 62, ram: 240, disk: 100, ephemeral: 1500 },
        "A100-80G-PCIe-w-NVLink",
        2,
      ),
    ],
  },
  {
    gpu: "H100-80G-PCIe",
    region_name: "CANADA-1",
    flavors: [
      flavor(
        301,
        "n3-H100x1",
        "CANADA-1",
        { cpu: 28, ram: 180, disk: 100, ephemeral: 750 },
        "H100-80G-PCIe",
        1,
      ),
    ],
  },
  {
    // Hyperstack's SXM boards are named so ("H100-80G-SXM5", https://docs.hyperstack.cloud/docs/hardware/gpu-specs);
    // beside the PCIe H100 above, for the form-factor tests.
    gpu: "H100-80G-SXM5",
    region_name: "CANADA-1",
    flavors: [
      flavor(
        311,
        "n3-H100-SXM5x1",
        "CANADA-1",
        { cpu: 24, ram: 240, disk: 100, ephemeral: 750 },
        "H100-80G-SXM5",
        1,
      ),
    ],
  },
  {
    gpu: "RTX-A6000",
    region_name: "NORWAY-1",
    flavors: [
      flavor(
        401,
        "n3-RTX-A6000x1",
        "NORWAY-1",
        { cpu: 14, ram: 45, disk: 100, ephemeral: 0 },
        "RTX-A6000",
        1,
      ),
    ],
  },
  {
    // Not from the documentation: a flavor whose GPU model ends in "-spot", as the Python project reads
    // Hyperstack's spot flavors; the shape is the documented one.
    gpu: "RTX-A6000-spot",
    region_name: "NORWAY-1",
    flavors: [
      flavor(
        402,
        "n3-RTX-A6000x1-spot",
        "NORWAY-1",
        { cpu: 14, ram: 45, disk: 100, ephemeral: 0 },
        "RTX-A6000-spot",
        1,
      ),
    ],
  },
  {
    gpu: "",
    region_name: "NORWAY-1",
    flavors: [
      flavor(501, "n1-cpu-small", "NORWAY-1", { cpu: 4, ram: 4, disk: 100, ephemeral: 0 }, "", 0),
      flavor(502, "n1-cpu-medium", "NORWAY-1", { cpu: 8, ram: 16, disk: 100, ephemeral: 0 }, "", 0),
    ],
  },
  {
    gpu: "",
    region_name: "CANADA-1",
    flavors: [flavor(601, "n1-cpu-large", "CANADA-1", { cpu: 16, ram: 32, disk: 100, ephemeral: 0 }, "", 0)],
  },
];

function flavor(
  id: number,
  name: string,
  region: string,
  size: { cpu: number; ram: number; disk: number; ephemeral: number },
  gpu: string,
  gpuCount: number,
  stock = true,
) {
  return {
    id,
    name,
    display_name: null,
    region_name: region,
    ...size,
    gpu,
    gpu_count: gpuCount,
    stock_available: stock,
    created_at: "2026-05-06T16:04:09Z",
    labels: [{ id: 1, label: "network_optimised" }],
    features: {},
  };
}

/**
 * `GET /pricebook`: a bare JSON array of PricebookModel (`{id, name, value, original_value,
 * discount_applied, start_time, end_time}`), hourly prices by resource name: per GPU for GPU models,
 * per VM for CPU-only flavors.
 * https://docs.hyperstack.cloud/docs/api-reference/get-pricebook
 * https://docs.hyperstack.cloud/docs/api-reference/schemas/pricebookmodel
 */
export const pricebook = [
  price(1, "A100-80G-PCIe", 1.35),
  price(2, "A100-80G-PCIe-w-NVLink", 1.4),
  price(3, "H100-80G-PCIe", 1.9),
  price(9, "H100-80G-SXM5", 2.4),
  price(4, "RTX-A6000", 0.5),
  price(8, "RTX-A6000-spot", 0.25),
  price(5, "n1-cpu-small", 0.02),
  price(6, "n1-cpu-medium", 0.05),
  price(7, "n1-cpu-large", 0.1),
];

function price(id: number, name: string, value: number) {
  return {
    id,
    name,
    value: String(value),
    original_value: String(value),
    discount_applied: false,
    start_time: null,
    end_time: null,
  };
}

/**
 * `GET /core/images?region=…`: `{status, message, images: [{region_name, type, logo, images: [Image]}]}`.
 * https://docs.hyperstack.cloud/docs/api-reference/list-images/
 */
export const imageGroups = [
  {
    region_name: "CANADA-1",
    type: "Ubuntu",
    logo: "",
    images: [
      image(11, "Ubuntu Server 22.04 LTS R535 CUDA 12.2", "CANADA-1", "2024-01-10T10:00:00Z"),
      image(12, "Ubuntu Server 24.04 LTS R570 CUDA 12.8", "CANADA-1", "2025-06-01T10:00:00Z"),
      image(13, "Ubuntu Server 24.04 LTS", "CANADA-1", "2025-07-01T10:00:00Z"),
    ],
  },
  {
    region_name: "NORWAY-1",
    type: "Ubuntu",
    logo: "",
    images: [image(21, "Ubuntu Server 22.04 LTS R535 CUDA 12.2", "NORWAY-1", "2024-01-10T10:00:00Z")],
  },
];

function image(id: number, name: string, region: string, createdAt: string) {
  return {
    id,
    name,
    region_name: region,
    type: "Ubuntu",
    version: name.includes("24.04") ? "24.04" : "22.04",
    size: 10,
    display_size: "10 GB",
    description: name,
    is_public: true,
    created_at: createdAt,
    labels: [],
  };
}

/**
 * Error answers: `ErrorResponseModel` is `{status: false, message, error_reason}`.
 * https://docs.hyperstack.cloud/docs/api-reference/errors
 */
export const errors = {
  // A VM not yet created cannot be deleted: Hyperstack refuses with a 400 for now (the words as the
  // provider met them; the page above documents the shape).
  stillCreating: {
    status: false,
    message: "Virtual machine is being created, it cannot be deleted yet",
    error_reason: "bad_request",
  },
  unauthorized: { status: false, message: "Invalid API key", error_reason: "unauthorized" },
  // Over 500 requests a minute: "all API calls for the next minute will be blocked, resulting in a HTTP
  // 429 response" (https://infrahub-doc.nexgencloud.com/docs/api-reference/getting-started-api/authentication).
  rateLimited: { status: false, message: "Too many requests", error_reason: "too_many_requests" },
  notFound: (what: string) => ({ status: false, message: `${what} not found`, error_reason: "not_found" }),
  noStock: {
    status: false,
    message: "Insufficient stock for the requested flavor in this region",
    error_reason: "insufficient_stock",
  },
  inUse: (what: string) => ({
    status: false,
    message: `${what} has resources attached and cannot be deleted`,
    error_reason: "conflict",
  }),
  duplicate: (what: string) => ({
    status: false,
    message: `${what} already exists`,
    error_reason: "conflict",
  }),
};
