// The official TypeSafe JS SDK (@typesafe-ai/sdk 0.6.0) against a running
// system1, changing nothing but the base URL and the key. test/e2e starts
// system1 and runs this file with:
//
//   TYPESAFE_BASE_URL  system1's root, such as http://127.0.0.1:40123
//   TYPESAFE_API_KEY   a key system1 is configured with
//   SYSTEM1_EXPECT     "exact" when the engine is system1's fake engine,
//                      whose distribution fixes every number; anything
//                      else checks the shape only (a real model).
//
// The SDK's default model, jev-latest, is an alias in system1's config.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  AuthenticationError,
  BadRequestError,
  TypeSafeClient,
  UnprocessableEntityError,
  choice,
  noul,
  score,
} from "@typesafe-ai/sdk";

const exact = process.env.SYSTEM1_EXPECT === "exact";
const noRetry = { retry: { maxRetries: 0 } };

test("models.list returns Jev's model cards, with the alias", async () => {
  const client = new TypeSafeClient();
  const models = await client.models.list();
  assert.ok(Array.isArray(models) && models.length >= 2, JSON.stringify(models));
  for (const m of models) {
    assert.equal(typeof m.name, "string");
    assert.equal(typeof m.description, "string");
    assert.match(m.release_date, /^\d{4}-\d{2}-\d{2}$/);
  }
  assert.ok(models.some((m) => m.name === "jev-latest"), "jev-latest is listed");
});

test("systemOne answers a choice, a noul and a score", async () => {
  const client = new TypeSafeClient();
  const legend = ["calm", { level: "annoyed", cues: ["caps", "exclamation marks"] }, "angry"];
  const { data, requestId } = await client
    .systemOne({
      state: { ticket: "I was charged twice for my subscription. Please fix this ASAP!" },
      questions: {
        dept: choice("Which department should handle the ticket?", {
          billing: "payments, refunds, invoices",
          technical: null,
          sales: null,
        }),
        urgent: noul("Is the ticket urgent?"),
        mood: score("How upset is the customer?", legend),
      },
    })
    .withResponse();

  assert.match(requestId, /^req_[0-9a-f]{32}$/);
  assert.equal(typeof data.model, "string");
  assert.ok(Number.isInteger(data.usage.input_tokens) && data.usage.input_tokens > 0);
  assert.ok(Number.isInteger(data.usage.output_tokens) && data.usage.output_tokens > 0);
  assert.deepEqual(Object.keys(data.answers), ["dept", "urgent", "mood"]);

  const { dept, urgent, mood } = data.answers;
  assert.equal(dept.type, "choice");
  assert.deepEqual(Object.keys(dept.probabilities).sort(), ["billing", "sales", "technical"]);
  checkDistribution(dept.probabilities);
  assert.equal(dept.probabilities[dept.choice], Math.max(...Object.values(dept.probabilities)));
  assert.ok(dept.confidence >= 0 && dept.confidence <= 1);

  assert.equal(urgent.type, "noul");
  assert.ok(urgent.noul >= 0 && urgent.noul <= 1);
  assert.equal(urgent.confidence, undefined, "a noul has no confidence");

  assert.equal(mood.type, "score");
  assert.ok(mood.score >= 0 && mood.score <= 2);
  assert.ok(mood.confidence >= 0 && mood.confidence <= 1);
  assert.deepEqual(mood.legend, { 0: legend[0], 1: legend[1], 2: legend[2] });
  assert.deepEqual(Object.keys(mood.probabilities), ["0", "1", "2"]);
  checkDistribution(mood.probabilities);

  if (exact) {
    // The fake engine gives the labels 1/2, 1/4, 1/8...: 4/7, 2/7, 1/7
    // over three, 2/3 and 1/3 over two (see internal/fakeengine).
    assert.deepEqual(dept, {
      type: "choice",
      choice: "billing",
      confidence: 0.36,
      probabilities: { billing: 0.57, technical: 0.29, sales: 0.14 },
    });
    assert.deepEqual(urgent, { type: "noul", noul: 0.67 });
    assert.equal(mood.score, 0.57);
    assert.equal(mood.confidence, 0.14);
    assert.deepEqual(mood.probabilities, { 0: 0.57, 1: 0.29, 2: 0.14 });
  }
});

test("a wrong key is the SDK's AuthenticationError", async () => {
  const client = new TypeSafeClient({ apiKey: "not-a-key" });
  await assert.rejects(
    client.systemOne({ state: "s", questions: { q: noul("?") } }, noRetry),
    (err) => err instanceof AuthenticationError && err.status === 401 && /^req_[0-9a-f]{32}$/.test(err.requestId),
  );
});

test("a request system1 refuses is the SDK's UnprocessableEntityError, naming the problem", async () => {
  const client = new TypeSafeClient();
  const levels = Array.from({ length: 11 }, (_, i) => `level ${i}`);
  await assert.rejects(
    client.systemOne({ state: "s", questions: { stars: score("How many?", levels) } }, noRetry),
    (err) =>
      err instanceof UnprocessableEntityError &&
      err.status === 422 &&
      err.message.includes("questions.stars.criteria") &&
      err.message.includes("at most 10 levels"),
  );
});

// Jev 1.14's images (an assets map, a box question), which system1 does
// not read, sent as the SDK passes them through with the Danger-Zone
// header: the SDK's BadRequestError, naming the feature and the box
// question, with hosted Jev's error_type, never retried.
test("a request with images is the SDK's BadRequestError, naming what system1 cannot read", async () => {
  const client = new TypeSafeClient();
  const photo = "photo-7f3a9c";
  await assert.rejects(
    client.systemOne(
      {
        state: { photo },
        assets: { [photo]: { type: "image", format: "png", data_base64: "iVBORw0KGgo=" } },
        questions: {
          red: noul(`Is there a red square in ${photo}?`),
          where: { type: "box", instructions: `the red square in ${photo}` },
        },
      },
      { ...noRetry, headers: { "TypeSafe-Danger-Zone-Images": "true" } },
    ),
    (err) =>
      err instanceof BadRequestError &&
      err.status === 400 &&
      err.body.detail.error_type === "api_usage_error" &&
      err.message.startsWith("400 Images are not supported") &&
      err.message.includes("`assets`") &&
      err.message.includes('the box question "where"') &&
      /^req_[0-9a-f]{32}$/.test(err.requestId),
  );
});

// checkDistribution: numbers in [0,1], printed to 2 decimals, summing to 1.
function checkDistribution(p) {
  let sum = 0;
  for (const v of Object.values(p)) {
    assert.ok(typeof v === "number" && v >= 0 && v <= 1, `${v}`);
    assert.ok(Math.abs(v * 100 - Math.round(v * 100)) < 1e-9, `${v} has more than 2 decimals`);
    sum += v;
  }
  assert.ok(Math.abs(sum - 1) < 1e-9, `probabilities sum to ${sum}`);
}
