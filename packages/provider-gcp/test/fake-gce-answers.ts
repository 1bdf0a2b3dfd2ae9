/**
 * What the fake Compute Engine answers with, as the real one does: its error body (reason and
 * message, https://cloud.google.com/compute/docs/api/how-tos/api-requests-responses#handling_api_responses),
 * a JSON answer, and the Operation resource
 * (https://cloud.google.com/compute/docs/reference/rest/v1/zoneOperations).
 */
import { jsonAnswer } from "@skyward/testing";
import { PROJECT } from "./fixtures.js";

export interface Operation {
  kind: "compute#operation";
  id: string;
  name: string;
  operationType: string;
  targetLink: string;
  status: "PENDING" | "RUNNING" | "DONE";
  progress: number;
  insertTime: string;
  startTime: string;
  endTime?: string;
  zone?: string;
  selfLink: string;
  error?: { errors: { code: string; message: string }[] };
}

export const BASE = `https://www.googleapis.com/compute/v1/projects/${PROJECT}`;
/** The project's Compute Engine default service account (`PROJECT_NUMBER-compute@developer.gserviceaccount.com`). */
export const DEFAULT_SERVICE_ACCOUNT = "764086051850-compute@developer.gserviceaccount.com";

const JSON_UTF8 = "application/json; charset=UTF-8";

export function googleError(status: number, message: string, reason: string) {
  // https://cloud.google.com/compute/docs/api/how-tos/api-requests-responses#handling_api_responses
  return jsonAnswer(
    status,
    { error: { code: status, message, errors: [{ message, domain: "global", reason }] } },
    JSON_UTF8,
  );
}

export function send(body: unknown) {
  return jsonAnswer(200, body, JSON_UTF8);
}
