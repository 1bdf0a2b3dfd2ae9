/**
 * The offers of Compute Engine: each zone's machine and accelerator types (kept for the provider's
 * life), priced from the Cloud Billing Catalog (kept an hour). Spot and on-demand prices per machine
 * type, with GPUs built in (A2, A3, G2) or attached to N1 machine types.
 */
import type { protos } from "@google-cloud/compute";
import type { Offer, OfferQuery } from "@skyward/core/contract";
import { filterOffers } from "@skyward/provider-utils";
import { GCP_ACCELERATOR_TYPES, GPU_COUNTS } from "./accelerators.js";
import { type GcpClients, gcpCall, PROVIDER_NAME } from "./gcp-api.js";
import { bundledLocalSsdGb, pricingSeriesOf, seriesOf, soldOnDemand } from "./machine-series.js";
import type { GcpOfferData } from "./offer-data.js";
import { fetchPriceBook, type PriceBook, vmPrice } from "./prices.js";
import { isZone, type ResolvedGcpSettings } from "./settings.js";
import { noAutoPages, regionOfZone } from "./vms.js";

type RawMachineType = protos.google.cloud.compute.v1.IMachineType;
type RawAcceleratorType = protos.google.cloud.compute.v1.IAcceleratorType;

/** How long the Catalog's prices are kept. */
const PRICE_BOOK_TTL_MS = 60 * 60_000;

/** The offers of one provider: `offers(query)` lists them for the query's zone or region. */
export function createOfferCatalogue(
  settings: ResolvedGcpSettings,
  clientsOf: () => GcpClients,
): { offers(query: OfferQuery, signal: AbortSignal): Promise<Offer[]> } {
  const zoneCatalog = new Map<
    string,
    Promise<{ machineTypes: RawMachineType[]; acceleratorTypes: RawAcceleratorType[] }>
  >();
  let priceBook: { book: Promise<PriceBook>; at: number } | undefined;

  const pricesOf = (clients: GcpClients, signal: AbortSignal): Promise<PriceBook> => {
    if (!priceBook || Date.now() - priceBook.at > PRICE_BOOK_TTL_MS) {
      const book = fetchPriceBook(clients, signal);
      priceBook = { book, at: Date.now() };
      book.catch(() => {
        priceBook = undefined;
      });
    }
    return priceBook.book;
  };

  const catalogOf = (clients: GcpClients, zone: string, signal: AbortSignal) => {
    let known = zoneCatalog.get(zone);
    if (!known) {
      // Kept for the provider's life: a zone's machine and accelerator types do not change while a program runs.
      known = (async () => {
        const machineTypes: RawMachineType[] = [];
        const acceleratorTypes: RawAcceleratorType[] = [];
        await gcpCall(`listing machine types in ${zone}`, signal, async () => {
          for await (const entry of clients.machineTypes.listAsync(
            { project: clients.project, zone },
            noAutoPages(),
          ))
            machineTypes.push(entry);
        });
        await gcpCall(`listing accelerator types in ${zone}`, signal, async () => {
          for await (const entry of clients.acceleratorTypes.listAsync(
            { project: clients.project, zone },
            noAutoPages(),
          ))
            acceleratorTypes.push(entry);
        });
        return { machineTypes, acceleratorTypes };
      })();
      zoneCatalog.set(zone, known);
      known.catch(() => zoneCatalog.delete(zone));
    }
    return known;
  };

  /** The zones a query's offers come from: its zone, its region's zones that are up, or the setting's. */
  const zonesFor = async (clients: GcpClients, region: string | undefined, signal: AbortSignal) => {
    if (region === undefined) return [settings.zone];
    if (isZone(region)) return [region];
    const zones: string[] = [];
    await gcpCall("listing zones", signal, async () => {
      for await (const zone of clients.zones.listAsync({ project: clients.project }, noAutoPages())) {
        if (zone.name && zone.status !== "DOWN" && zone.region?.split("/").pop() === region)
          zones.push(zone.name);
      }
    });
    return zones.sort();
  };

  const offersInZone = async (
    clients: GcpClients,
    zone: string,
    query: OfferQuery,
    book: PriceBook,
    signal: AbortSignal,
  ): Promise<Offer[]> => {
    const { machineTypes, acceleratorTypes } = await catalogOf(clients, zone, signal);
    const region = regionOfZone(zone);
    const offers: Offer[] = [];
    const usable = machineTypes.filter(
      (type) => type.name && !type.isSharedCpu && !type.deprecated?.state && (type.guestCpus ?? 0) > 0,
    );
    const add = (type: RawMachineType, gpu: { type: string; count: number } | null, attached: boolean) => {
      const name = type.name as string;
      const known = gpu ? GCP_ACCELERATOR_TYPES[gpu.type] : undefined;
      if (gpu && !known) return;
      const vcpus = type.guestCpus ?? 0;
      const memoryGib = (type.memoryMb ?? 0) / 1024;
      const parts = {
        series: pricingSeriesOf(name),
        vcpus,
        memoryGib,
        gpu: gpu && known ? { skuNames: known.skuNames, count: gpu.count } : null,
        localSsdGb: bundledLocalSsdGb(name),
      };
      // Machine types Google does not sell on demand get no on-demand price, so no on-demand offer.
      const onDemandPrice = soldOnDemand(name) ? vmPrice(book, region, "on-demand", parts) : null;
      const spotPrice = vmPrice(book, region, "spot", parts);
      if (onDemandPrice === null && spotPrice === null) return;
      const architecture = String(type.architecture ?? "").toUpperCase() === "ARM64" ? "arm64" : "x86_64";
      offers.push(
        Object.freeze({
          id: `gcp:${zone}:${name}${attached && gpu ? `+${gpu.type}x${gpu.count}` : ""}`,
          provider: PROVIDER_NAME,
          instanceType: attached && gpu ? `${name} + ${gpu.count}x ${gpu.type}` : name,
          accelerator:
            gpu && known
              ? Object.freeze({
                  name: known.name,
                  count: gpu.count,
                  memoryGb: known.memoryGb,
                  ...(known.formFactor === undefined ? {} : { formFactor: known.formFactor }),
                })
              : null,
          vcpus,
          memoryGb: Math.round(memoryGib * 100) / 100,
          architecture,
          region: zone,
          spotPrice,
          onDemandPrice,
          billingUnit: "second" as const,
          pricesAsOf: book.asOf,
          specific: Object.freeze({
            zone,
            machineType: name,
            acceleratorType: attached && gpu ? gpu.type : null,
            acceleratorCount: attached && gpu ? gpu.count : 0,
            gpu: gpu !== null,
            gpuType: gpu?.type ?? null,
            gpuCount: gpu?.count ?? 0,
          } satisfies GcpOfferData),
        }),
      );
    };
    const wanted = query.accelerator;
    if (wanted === null) {
      for (const type of usable) if (!type.accelerators?.length) add(type, null, false);
      return offers;
    }
    // GPUs built into accelerator-optimized machine types (A2, A3, G2).
    for (const type of usable) {
      const built = type.accelerators?.[0];
      if (built?.guestAcceleratorType && built.guestAcceleratorCount)
        add(type, { type: built.guestAcceleratorType, count: built.guestAcceleratorCount }, false);
    }
    // GPUs attached to N1 machine types: the zone's accelerator types no machine type has built in.
    if (!GPU_COUNTS.includes(wanted.count)) return offers;
    const builtIn = new Set(
      usable.flatMap((type) => (type.accelerators ?? []).map((entry) => entry.guestAcceleratorType)),
    );
    for (const accelerator of acceleratorTypes) {
      const name = accelerator.name ?? "";
      const known = GCP_ACCELERATOR_TYPES[name];
      if (!known?.n1VcpusPerGpu || builtIn.has(name) || known.name !== wanted.name.toUpperCase()) continue;
      if (wanted.count > (accelerator.maximumCardsPerInstance ?? 0)) continue;
      const maxVcpus = Math.min(96, known.n1VcpusPerGpu * wanted.count);
      for (const type of usable) {
        if (seriesOf(type.name as string) !== "N1" || type.accelerators?.length) continue;
        if ((type.guestCpus ?? 0) > maxVcpus) continue;
        add(type, { type: name, count: wanted.count }, true);
      }
    }
    return offers;
  };

  return {
    async offers(query, signal) {
      if (query.accelerator && !Number.isInteger(query.accelerator.count)) return [];
      const clients = clientsOf();
      const book = await pricesOf(clients, signal);
      const zones = await zonesFor(clients, query.region, signal);
      const offers: Offer[] = [];
      for (const zone of zones) offers.push(...(await offersInZone(clients, zone, query, book, signal)));
      return filterOffers(offers, query);
    },
  };
}
