// An end user's access token as the API key of the official openai Node
// SDK (v7 and v6): chat completions and Responses are answered; a refused
// token is the SDK's AuthenticationError (401, code invalid_token), which
// it does not retry.
//
//   node jwt.mjs http://127.0.0.1:PORT AGENT GOOD_TOKEN BAD_TOKEN
import OpenAI from 'openai';
import OpenAI6 from 'openai6';
import { expect, runCases, print } from './responses-lib.mjs';

const [base, agent, good, bad] = process.argv.slice(2);
if (!base || !agent || !good || !bad) {
  console.error('usage: node jwt.mjs BASE_URL AGENT GOOD_TOKEN BAD_TOKEN');
  process.exit(2);
}

const cases = {};
for (const [name, SDK] of [['v7', OpenAI], ['v6', OpenAI6]]) {
  cases[`${name}-chat`] = async () => {
    const client = new SDK({ baseURL: `${base}/v1`, apiKey: good });
    const r = await client.chat.completions.create({ model: agent, messages: [{ role: 'user', content: `hi from ${name}` }] });
    const answer = r.choices[0].message.content;
    expect(answer === `echo: hi from ${name}`, `answer ${JSON.stringify(answer)}`);
    return { answer };
  };
  cases[`${name}-responses`] = async () => {
    const client = new SDK({ baseURL: `${base}/v1`, apiKey: good });
    const r = await client.responses.create({ model: agent, input: 'hello' });
    expect(r.output_text === 'echo: hello', `output ${JSON.stringify(r.output_text)}`);
    return { answer: r.output_text };
  };
  cases[`${name}-refused`] = async () => {
    const client = new SDK({ baseURL: `${base}/v1`, apiKey: bad, maxRetries: 2 });
    try {
      await client.chat.completions.create({ model: agent, messages: [{ role: 'user', content: 'hi' }] });
    } catch (err) {
      expect(err instanceof SDK.AuthenticationError, `${err?.name}: ${err?.message}`);
      expect(err.status === 401 && err.code === 'invalid_token', `status ${err.status} code ${err.code}`);
      return { status: err.status, code: err.code };
    }
    throw new Error('a refused token was answered');
  };
}
print(await runCases(cases));
