// OpenAI's official clients of the Decisions API against a running
// system1's /v1/decisions, changing nothing but the base URL and the key:
// the Node SDK (openai 7.55.0: client.decisions.create and its
// DecisionsToolRunner) and the AI SDK (ai 7.0.173's experimental_decide
// through @ai-sdk/openai 4.0.118's decision model). A Go test starts the
// server and runs this file with:
//
//   SYSTEM1_URL             the server's root, such as http://127.0.0.1:40123
//   SYSTEM1_MODEL           a model it serves
//   SYSTEM1_API_KEY         a key it accepts; unset when it asks for none
//                           (the 401 case is then skipped)
//   SYSTEM1_REFUSAL_HEADER  a request header that makes it refuse every
//                           question, as "Name: value" (for example
//                           "X-System1-Min-Label-Mass: 0.99"); unset skips
//                           the refusal cases
//   SYSTEM1_DOWN_MODEL      a model only a node that is down serves (a
//                           503); SYSTEM1_NOT_SERVED_MODEL one whose engine
//                           answers 501, which must come back a 400 the
//                           SDK does not retry; SYSTEM1_LIMITED_URL a
//                           server that takes one request and rate-limits
//                           the next. Each unset skips its case.
//
// Without SYSTEM1_URL every test is skipped, saying so.
import assert from "node:assert/strict";
import { test } from "node:test";
import OpenAI, { AuthenticationError, BadRequestError, InternalServerError, NotFoundError, RateLimitError } from "openai";
import { DecisionsToolRunner, DecisionsToolRunnerError } from "openai/helpers/decisions-tool-runner";
import { experimental_decide, Experimental_DecisionRefusalError } from "ai";
import { createOpenAI } from "@ai-sdk/openai";

const base = process.env.SYSTEM1_URL?.replace(/\/+$/, "");
const model = process.env.SYSTEM1_MODEL ?? "";
const key = process.env.SYSTEM1_API_KEY || "unused";
const refusal = parseHeader(process.env.SYSTEM1_REFUSAL_HEADER);
const skip = base ? false : "SYSTEM1_URL is not set: start system1 and set SYSTEM1_URL and SYSTEM1_MODEL to run these tests";
if (skip) console.log(`# skipped: ${skip}`);

function parseHeader(line) {
  if (!line) return null;
  const i = line.indexOf(":");
  assert.ok(i > 0, `SYSTEM1_REFUSAL_HEADER must be "Name: value", got ${JSON.stringify(line)}`);
  return { [line.slice(0, i).trim()]: line.slice(i + 1).trim() };
}

// No retries: a status the SDK would retry shows up as it is.
const client = () => new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0 });
const ticket = "I was charged twice for my subscription this month. Please refund one of the charges today!";

// The checks of a compatible answer (docs/decisions-wire.md section 6),
// beyond what the Node SDK itself checks, which is nothing.
function checkDecision(d, questions) {
  assert.equal(typeof d.model, "string");
  assert.ok(d.model.length > 0, "model is named");
  const u = d.usage;
  for (const n of [u.input_tokens, u.output_tokens, u.total_tokens, u.input_tokens_details.cached_tokens,
    u.input_tokens_details.cache_write_tokens, u.output_tokens_details.reasoning_tokens]) {
    assert.ok(Number.isInteger(n) && n >= 0, `usage counter ${n} in ${JSON.stringify(u)}`);
  }
  assert.equal(u.total_tokens, u.input_tokens + u.output_tokens);
  assert.equal(d.answers.length, questions.length);
  d.answers.forEach((a, i) => {
    const q = questions[i];
    assert.equal(a.name, q.name ?? null, `answer ${i} is named as asked`);
    if (a.type === "refusal") return;
    assert.equal(a.type, q.type);
    if (q.type === "predicate") {
      assert.ok(a.probability >= 0 && a.probability <= 1);
      assert.equal(a.confidence, undefined, "a predicate carries no confidence");
      return;
    }
    assert.ok(a.confidence >= 0 && a.confidence <= 1, `confidence ${a.confidence}`);
    const sum = a.probabilities.reduce((s, p) => s + p.probability, 0);
    assert.ok(Math.abs(sum - 1) <= 0.01 + 1e-12, `probabilities sum to ${sum}`);
    for (const p of a.probabilities) assert.ok(p.probability >= 0 && p.probability <= 1);
    if (q.type === "choice") {
      // Every value once, typed as sent, in request order; the choice the
      // argmax of what is printed.
      assert.deepEqual(a.probabilities.map((p) => p.value), q.choices.map((c) => c.value));
      const top = Math.max(...a.probabilities.map((p) => p.probability));
      const chosen = a.probabilities.find((p) => p.value === a.choice);
      assert.ok(chosen, `choice ${JSON.stringify(a.choice)} is one of the values`);
      assert.equal(chosen.probability, top);
    } else {
      assert.deepEqual(a.probabilities.map((p) => [p.value, p.label]), q.levels.map((l, i) => [i, l.label]));
      const mean = a.probabilities.reduce((s, p) => s + p.value * p.probability, 0);
      assert.ok(a.score >= 0 && a.score <= q.levels.length - 1, `score ${a.score}`);
      assert.ok(Math.abs(a.score - mean) / (q.levels.length - 1) <= 0.01 + 1e-12, `score ${a.score}, mean ${mean}`);
    }
  });
}

test("decisions.create answers every question type, typed and in order", { skip }, async () => {
  const questions = [
    { type: "predicate", name: "refund", instructions: "Is the customer asking for money back?" },
    {
      type: "choice",
      name: "department",
      instructions: [{ type: "input_text", text: "Which team should handle this?" }],
      choices: [
        { value: "billing", description: "Charges, refunds and invoices" },
        { value: "technical", description: "Bugs and outages" },
        { value: "sales" },
      ],
    },
    {
      type: "score",
      name: "urgency",
      instructions: "How urgent is the ticket?",
      levels: [{ label: "Routine" }, { label: "Soon" }, { label: "Today", description: "needs action today" }],
    },
    // Unnamed questions, and a boolean value beside the string of its text.
    { type: "predicate", instructions: "Is the customer polite?" },
    {
      type: "choice",
      instructions: "Is the customer right to complain?",
      choices: [{ value: true }, { value: "true", description: "the word itself" }, { value: false }],
    },
  ];
  const { data, response } = await client()
    .decisions.create({
      model,
      input: [{ role: "user", content: [{ type: "input_text", text: ticket }] }],
      questions,
      prompt_cache_key: "system1-js-decisions",
      safety_identifier: "user-123",
    })
    .withResponse();
  assert.match(response.headers.get("content-type") ?? "", /application\/json/);
  assert.ok(response.headers.get("x-request-id"), "every reply carries x-request-id");
  checkDecision(data, questions);
  const typed = data.answers[4];
  if (typed.type === "choice") {
    assert.deepEqual(typed.probabilities.map((p) => typeof p.value), ["boolean", "string", "boolean"]);
    assert.ok(typed.choice === true || typed.choice === "true" || typed.choice === false);
  }
});

test("decisions.create reads a JSON input and a conversation", { skip }, async () => {
  const questions = [{ type: "predicate", name: "refund", instructions: "Does the customer want money back?" }];
  for (const input of [
    [{ role: "user", content: [{ type: "input_json", data: { ticket, plan: "pro", charges: [9.99, 9.99] } }] }],
    [
      { role: "developer", content: "Judge the customer's last message." },
      { role: "user", content: ticket },
      { role: "assistant", content: [{ type: "output_text", text: "Which charge?" }] },
      { type: "function_call", call_id: "call_1", name: "charges", arguments: "{}" },
      { type: "function_call_output", call_id: "call_1", output: "two charges of 9.99 on the 3rd" },
      { role: "user", content: "Both on the 3rd." },
    ],
    ticket,
  ]) {
    checkDecision(await client().decisions.create({ model, input, questions }), questions);
  }
});

test("decisions.create: errors are the SDK's classes, with param and code", { skip }, async () => {
  const ask = (body) => client().decisions.create({ model, input: ticket, ...body });
  const pred = [{ type: "predicate", instructions: "?" }];

  await assert.rejects(ask({ questions: [{ type: "choice", instructions: "?", choices: [{ value: "a" }, { value: "a" }] }] }), (e) => {
    assert.ok(e instanceof BadRequestError, e);
    assert.equal(e.status, 400);
    assert.equal(e.type, "invalid_request_error");
    assert.equal(e.param, "questions[0].choices[1].value");
    return true;
  });
  await assert.rejects(ask({ questions: pred, temperature: 0 }), (e) => {
    assert.ok(e instanceof BadRequestError, e);
    assert.equal(e.param, "temperature");
    return true;
  });
  await assert.rejects(
    ask({
      input: [{ role: "user", content: [{ type: "input_text", text: "look" }, { type: "input_image", image_url: "data:image/png;base64,iVBORw0KGgo=" }] }],
      questions: pred,
    }),
    (e) => {
      assert.ok(e instanceof BadRequestError, e);
      assert.equal(e.code, "unsupported_input");
      assert.equal(e.param, "input[0].content[1]");
      return true;
    },
  );
  await assert.rejects(ask({ model: "no-such-model-anywhere", questions: pred }), (e) => {
    assert.ok(e instanceof NotFoundError, e);
    assert.equal(e.status, 404);
    assert.equal(e.code, "model_not_found");
    assert.equal(e.param, "model");
    assert.ok(e.requestID, "an error carries x-request-id too");
    return true;
  });
});

const down = process.env.SYSTEM1_DOWN_MODEL;
const notServed = process.env.SYSTEM1_NOT_SERVED_MODEL;
const limited = process.env.SYSTEM1_LIMITED_URL?.replace(/\/+$/, "");

test("decisions.create: no node up is an InternalServerError", { skip: skip || (!down && "SYSTEM1_DOWN_MODEL is not set") }, async () => {
  await assert.rejects(client().decisions.create({ model: down, input: ticket, questions: [{ type: "predicate", instructions: "?" }] }), (e) => {
    assert.ok(e instanceof InternalServerError, e);
    assert.equal(e.status, 503);
    assert.equal(e.type, "server_error");
    return true;
  });
});

test("decisions.create: an engine's 501 is a BadRequestError, asked once", { skip: skip || (!notServed && "SYSTEM1_NOT_SERVED_MODEL is not set") }, async () => {
  // The SDK's own retries are on: a 5xx would be asked three times (the
  // Go test counts the engine's calls).
  const retrying = new OpenAI({ baseURL: `${base}/v1`, apiKey: key });
  await assert.rejects(retrying.decisions.create({ model: notServed, input: ticket, questions: [{ type: "predicate", instructions: "?" }] }), (e) => {
    assert.ok(e instanceof BadRequestError, e);
    assert.equal(e.param, "model");
    return true;
  });
});

test("decisions.create: over the rate limit is a RateLimitError with the pause", { skip: skip || (!limited && "SYSTEM1_LIMITED_URL is not set") }, async () => {
  const c = new OpenAI({ baseURL: `${limited}/v1`, apiKey: key, maxRetries: 0 });
  const ask = () => c.decisions.create({ model, input: ticket, questions: [{ type: "predicate", instructions: "?" }] });
  await ask();
  await assert.rejects(ask(), (e) => {
    assert.ok(e instanceof RateLimitError, e);
    assert.equal(e.code, "rate_limit_exceeded");
    assert.ok(Number(e.headers.get("retry-after-ms")) > 0, "retry-after-ms");
    assert.ok(Number(e.headers.get("retry-after")) > 0, "retry-after");
    return true;
  });
});

test("decisions.create: a wrong key is an AuthenticationError", { skip: skip || (!process.env.SYSTEM1_API_KEY && "SYSTEM1_API_KEY is not set: the server asks for no key") }, async () => {
  const wrong = new OpenAI({ baseURL: `${base}/v1`, apiKey: "sk-wrong", maxRetries: 0 });
  await assert.rejects(wrong.decisions.create({ model, input: ticket, questions: [{ type: "predicate", instructions: "?" }] }), (e) => {
    assert.ok(e instanceof AuthenticationError, e);
    assert.equal(e.status, 401);
    return true;
  });
});

// A counter the runner raises to two, then finishes: the last step offers
// only "done", which the runner takes without asking, so every run ends.
function counterRunner() {
  let count = 0;
  return {
    get count() {
      return count;
    },
    runner: new DecisionsToolRunner({
      observe: () => `The counter reads ${count}. The task is finished when it reads 2.`,
      candidates: () => [
        ...(count < 2 ? [{ id: "increment", description: "Add one to the counter.", execute: () => void count++ }] : []),
        { id: "done", description: "The counter reads 2: the task is finished.", done: true },
      ],
      verify: () => count <= 2,
    }),
  };
}

test("DecisionsToolRunner runs to its end without invalid_answer", { skip }, async () => {
  const { runner } = counterRunner();
  let result;
  try {
    result = await runner.run(client(), { model, input: "Raise the counter to 2, one step at a time, then finish." }, { maxSteps: 4 });
  } catch (e) {
    assert.fail(e instanceof DecisionsToolRunnerError ? `the runner stopped: ${e.reason}` : e);
  }
  assert.equal(result.status, "verified");
  assert.ok(result.decisions.length >= 1, "the runner asked at least once");
  for (const d of result.decisions) {
    assert.equal(d.answers.length, 1);
    assert.equal(d.answers[0].name, "next_action");
    assert.equal(d.answers[0].type, "choice");
  }
});

test("DecisionsToolRunner: a refusal ends the run as refused", { skip: skip || (!refusal && "SYSTEM1_REFUSAL_HEADER is not set") }, async () => {
  const c = counterRunner();
  const result = await c.runner.run(client(), { model, input: "Raise the counter to 2." }, { maxSteps: 4, requestOptions: { headers: refusal } });
  assert.equal(result.status, "refused");
  assert.equal(c.count, 0, "no action ran");
  assert.equal(result.decisions.length, 1);
  assert.deepEqual(result.decisions[0].answers, [{ type: "refusal", name: "next_action" }]);
});

const aiQuestions = {
  refund: { type: "boolean", instructions: "Is the customer asking for money back?", criteria: { true: "asks for a refund or a reversal" } },
  department: {
    type: "choice",
    instructions: "Which team should handle this?",
    criteria: { billing: "Charges, refunds and invoices", technical: "Bugs and outages", sales: null },
  },
  urgency: { type: "score", criteria: ["Routine", "Soon", { level: "Today", cue: "needs action today" }] },
  polite: { type: "boolean", criteria: { true: "says please or thanks", false: null } },
};

test("the AI SDK's experimental_decide validates system1's answers", { skip }, async () => {
  const openai = createOpenAI({ baseURL: `${base}/v1`, apiKey: key });
  for (const state of [ticket, { ticket, plan: "pro" }, [{ type: "text", text: ticket }, { type: "json", value: { plan: "pro" } }]]) {
    // decide() runs validate-decision on the reply: sums, argmax, the
    // score against its mean, one answer per question.
    const r = await experimental_decide({
      model: openai.decisionModel(model),
      state,
      questions: aiQuestions,
      maxRetries: 0,
      providerOptions: { openai: { promptCacheKey: "tenant-42", safetyIdentifier: "user-123" } },
    });
    assert.deepEqual(Object.keys(r.answers).sort(), Object.keys(aiQuestions).sort());
    assert.equal(r.answers.refund.type, "boolean");
    assert.ok(["billing", "technical", "sales"].includes(r.answers.department.choice));
    assert.deepEqual(Object.keys(r.answers.urgency.probabilities), ["0", "1", "2"]);
    assert.deepEqual(Object.keys(r.providerMetadata.openai.confidence).sort(), ["department", "urgency"]);
    const u = r.providerMetadata.openai.usage;
    assert.ok(Number.isInteger(u.input_tokens_details.cached_tokens) && Number.isInteger(u.output_tokens_details.reasoning_tokens));
    assert.ok(Number.isInteger(r.usage.inputTokens) && Number.isInteger(r.usage.outputTokens));
  }
});

test("the AI SDK surfaces a refusal as its refusal error", { skip: skip || (!refusal && "SYSTEM1_REFUSAL_HEADER is not set") }, async () => {
  const openai = createOpenAI({ baseURL: `${base}/v1`, apiKey: key });
  await assert.rejects(
    experimental_decide({ model: openai.decisionModel(model), state: ticket, questions: aiQuestions, maxRetries: 0, headers: refusal }),
    (e) => {
      assert.ok(Experimental_DecisionRefusalError.isInstance(e), e);
      assert.deepEqual([...e.questionIds].sort(), Object.keys(aiQuestions).sort());
      return true;
    },
  );
});
