// A JQ master worker on types generated from the OpenAPI documents, with no hand-written
// encoding: the master's client (openapi-fetch over generated/master.ts) registers it and
// reports progress; generated/worker.ts types the jobs the master sends to POST /run and
// the result objects. It registers in JSON, so the master speaks JSON to it. Serves "add"
// (sums a list of numbers, reporting progress) and "fail" (always fails).
//
//   npm ci && npm run build
//   node dist/src/worker.js http://127.0.0.1:8080 8091
import { createServer } from "node:http";
import createClient from "openapi-fetch";
import type { paths } from "../generated/master.js";
import type { components } from "../generated/worker.js";

type JobRequest = components["schemas"]["JobRequest"];
type Outcome = components["schemas"]["Success"] | components["schemas"]["Failure"];

const [master = "http://127.0.0.1:8080", port = "8091"] = process.argv.slice(2);
// With a master token: headers: { Authorization: `Bearer ${token}` }.
const client = createClient<paths>({ baseUrl: master });

async function run(job: JobRequest): Promise<Outcome> {
  const finished_at = new Date().toISOString();
  const numbers = job.argument;
  if (job.name === "add" && Array.isArray(numbers)) {
    await client.POST("/jobs/{job_id}/report", {
      params: { path: { job_id: job.id } },
      body: { lease_token: job.lease_token ?? "", progress: 100, message: "added" },
    });
    const sum = numbers.reduce((total: number, n: unknown) => total + Number(n), 0);
    return { type: "success", finished_at, result: sum };
  }
  const message = `${job.name} fails with ${JSON.stringify(job.argument)}`;
  return { type: "failure", finished_at, reason: "other", should_retry: false, error: null, message };
}

const server = createServer(async (request, response) => {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  const job = JSON.parse(Buffer.concat(chunks).toString("utf8")) as JobRequest;
  const body = JSON.stringify(await run(job));
  response.writeHead(200, { "Content-Type": "application/json" }).end(body);
});

async function heartbeat(): Promise<void> {
  const worker_id = `generated-typescript-${port}`;
  const me = { url: `http://127.0.0.1:${port}`, names: ["add", "fail"], capacity: 4 };
  for (;;) {
    let every = 1;
    try {
      const { data } = await client.PUT("/workers/{worker_id}", {
        params: { path: { worker_id } },
        body: me,
      });
      every = data?.heartbeat ?? 1;
    } catch (error) {
      console.error(`worker.ts: master unreachable (${error})`);
    }
    await new Promise((resolve) => setTimeout(resolve, every * 1000));
  }
}

server.listen(Number(port), "127.0.0.1", () => {
  console.error(`worker.ts: serving add and fail at http://127.0.0.1:${port} for ${master} (Ctrl-C stops)`);
  void heartbeat();
});
