// A job's life through openapi-fetch over types generated from docs/openapi.json, with
// no hand-written encoding: push one job and a batch, read a result (once), see a job's
// progress, a failure and its retry, cancel a job, and a bad request answered 400. Run
// worker.ts beside it:
//
//   node dist/src/pusher.js http://127.0.0.1:8080
//
// It prints what it sees, and exits 1 at the first thing that is not as it should be.
import createClient from "openapi-fetch";
import type { components, paths } from "../generated/master.js";

type JobInfo = components["schemas"]["JobInfo"];

const client = createClient<paths>({ baseUrl: process.argv[2] ?? "http://127.0.0.1:8080" });

function check(what: string, holds: boolean): void {
  console.log(`${holds ? "ok" : "NOT OK"}: ${what}`);
  if (!holds) process.exit(1);
}

async function detail(job_id: string): Promise<JobInfo> {
  const { data, error } = await client.GET("/jobs/{job_id}", { params: { path: { job_id } } });
  if (!data) throw new Error(`job ${job_id}: ${error?.message}`);
  return data;
}

// The job's detail once it is in `state` after `attempts` failed attempts.
async function ended(job_id: string, state: string, attempts = 0): Promise<JobInfo> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const info = await detail(job_id);
    if (info.state === state && info.attempts >= attempts) return info;
    if (Date.now() > deadline) check(`job ${job_id} is ${state} within 30 s (it is ${info.state})`, false);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const one = await client.POST("/jobs", { body: { name: "add", argument: [2, 3], keep_result: true } });
check("a job is pushed", one.response.status === 201 && one.data !== undefined);
const oneId = one.data!.id;
const batch = await client.POST("/jobs/batch", {
  body: [{ name: "add", argument: [1, 2, 3] }, { name: "fail", argument: "x", max_retry: 0 }],
});
check("a batch is pushed", batch.data?.ids.length === 2);
const [addId, failId] = batch.data!.ids as [string, string];

const info = await ended(oneId, "finished");
check("the worker reported progress", info.progress === 100 && info.progress_message === "added");
const result = await client.GET("/jobs/{job_id}/result", { params: { path: { job_id: oneId } } });
check("the result is read", result.data?.type === "success" && result.data.result === 5);
const twice = await client.GET("/jobs/{job_id}/result", { params: { path: { job_id: oneId } } });
check("once", twice.response.status === 200 && twice.data === null);
check("the batch's first job ran", (await ended(addId, "finished")).state === "finished");

const failed = await ended(failId, "failed", 1);
check("a failure says why", failed.last_error === `fail fails with "x"`);
const again = await client.POST("/jobs/{job_id}/retry", { params: { path: { job_id: failId } } });
check("a failed job is retried", again.data?.done === true);
check("and runs again", (await ended(failId, "failed", 2)).attempts === 2);

const waiting = await client.POST("/jobs", { body: { name: "nobody-runs-this" } });
const waitingId = waiting.data!.id;
const canceled = await client.POST("/jobs/{job_id}/cancel", { params: { path: { job_id: waitingId } } });
check("a waiting job is canceled", canceled.data?.done === true);
check("and stays so", (await detail(waitingId)).state === "canceled");

const bad = await client.POST("/jobs", { body: { name: "", priority: 2 ** 40 } });
check("a bad request is 400", bad.response.status === 400 && bad.error !== undefined);
console.log(`the error: ${bad.error?.error}, field ${bad.error?.field}: ${bad.error?.message}`);
