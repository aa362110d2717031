// OpenAI's Node SDK (openai 7.55.0) against a running system1's routes
// beside /v1/decisions: models.list and models.retrieve, and what no route
// serves below /v1/decisions and /v1/models, which the SDK reads as its
// error classes with the request's id. test/e2e runs it against the real
// binary with the environment decisions.test.mjs takes (SYSTEM1_URL,
// SYSTEM1_MODEL, SYSTEM1_API_KEY); without SYSTEM1_URL it is skipped.
import assert from "node:assert/strict";
import { test } from "node:test";
import OpenAI, { APIError, AuthenticationError, NotFoundError } from "openai";

const base = process.env.SYSTEM1_URL?.replace(/\/+$/, "");
const model = process.env.SYSTEM1_MODEL ?? "";
const key = process.env.SYSTEM1_API_KEY || "unused";
const skip = base ? false : "SYSTEM1_URL is not set: start system1 and set SYSTEM1_URL and SYSTEM1_MODEL to run these tests";
if (skip) console.log(`# skipped: ${skip}`);

const client = (apiKey = key) => new OpenAI({ baseURL: `${base}/v1`, apiKey, maxRetries: 0 });

test("models.retrieve answers the model as models.list lists it", { skip }, async () => {
  const list = [];
  for await (const m of client().models.list()) list.push(m);
  const listed = list.find((m) => m.id === model);
  assert.ok(listed, `${model} is listed among ${list.map((m) => m.id)}`);
  const got = await client().models.retrieve(model);
  assert.equal(got.id, model);
  assert.equal(got.object, "model");
  assert.equal(got.created, listed.created);
  assert.equal(got.owned_by, listed.owned_by);
  assert.ok(got._request_id, "the reply carries x-request-id");
});

test("models.retrieve of a model no node serves is a NotFoundError", { skip }, async () => {
  await assert.rejects(client().models.retrieve("no-such-model/anywhere"), (e) => {
    assert.ok(e instanceof NotFoundError, e);
    assert.equal(e.code, "model_not_found");
    assert.equal(e.param, "model");
    assert.ok(e.requestID, "an error carries x-request-id");
    return true;
  });
});

test("a wrong key on models.retrieve is an AuthenticationError", { skip: skip || (!process.env.SYSTEM1_API_KEY && "SYSTEM1_API_KEY is not set: the server asks for no key") }, async () => {
  await assert.rejects(client("sk-wrong").models.retrieve(model), (e) => {
    assert.ok(e instanceof AuthenticationError, e);
    assert.equal(e.code, "invalid_api_key");
    assert.ok(e.requestID, "an error carries x-request-id");
    return true;
  });
});

test("what no route serves below /v1/decisions and /v1/models is OpenAI's error with the request's id", { skip }, async () => {
  await assert.rejects(client().post("/decisions/batch", { body: {} }), (e) => {
    assert.ok(e instanceof NotFoundError, e);
    assert.equal(e.type, "invalid_request_error");
    assert.ok(e.requestID, "a 404 carries x-request-id");
    return true;
  });
  await assert.rejects(client().get("/decisions"), (e) => {
    assert.ok(e instanceof APIError, e);
    assert.equal(e.status, 405);
    assert.equal(e.type, "invalid_request_error");
    assert.match(e.message, /^405 Invalid method for URL/);
    assert.equal(e.headers.get("allow"), "POST");
    assert.ok(e.requestID, "a 405 carries x-request-id");
    return true;
  });
});
