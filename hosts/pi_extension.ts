// LoopX for Pi: Pi has no MCP client, so this extension is one. At start it runs
// `loopx mcp` (the command below), lists its tools and registers each as a Pi tool named
// loopx_<tool>; a call goes to the server as an MCP tools/call. The server's instructions
// are what it tells the model about LoopX; the /loopx prompt template has the turn's steps.
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";
import { Type } from "typebox";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";

const COMMAND: string[] = __LOOPX_COMMAND__;

type Pending = { resolve: (v: any) => void; reject: (e: Error) => void };

export default async function (pi: ExtensionAPI) {
  const child = spawn(COMMAND[0], COMMAND.slice(1), { stdio: ["pipe", "pipe", "ignore"], cwd: process.cwd() });
  const pending = new Map<number, Pending>();
  let next = 1;
  let failed: Error | undefined;
  child.on("error", (err) => {
    failed = err;
    for (const p of pending.values()) p.reject(err);
    pending.clear();
  });
  createInterface({ input: child.stdout! }).on("line", (line) => {
    let msg: any;
    try {
      msg = JSON.parse(line);
    } catch {
      return;
    }
    const p = msg.id !== undefined ? pending.get(msg.id) : undefined;
    if (!p) return;
    pending.delete(msg.id);
    if (msg.error) p.reject(new Error(msg.error.message ?? "loopx mcp failed"));
    else p.resolve(msg.result);
  });
  const request = (method: string, params: any, timeoutMs = 130_000): Promise<any> =>
    new Promise((resolve, reject) => {
      if (failed) return reject(failed);
      const id = next++;
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error(`loopx mcp did not answer ${method} in ${timeoutMs / 1000} s`));
      }, timeoutMs);
      pending.set(id, {
        resolve: (v) => (clearTimeout(timer), resolve(v)),
        reject: (e) => (clearTimeout(timer), reject(e)),
      });
      child.stdin!.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
    });
  pi.on("session_shutdown", async () => {
    child.kill();
  });

  let tools: any[] = [];
  try {
    await request("initialize", {
      protocolVersion: "2025-06-18",
      capabilities: {},
      clientInfo: { name: "pi-loopx", version: "1" },
    }, 20_000);
    child.stdin!.write(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) + "\n");
    tools = (await request("tools/list", {}, 20_000)).tools ?? [];
  } catch (err) {
    console.error(`loopx: could not start \`${COMMAND.join(" ")}\`: ${(err as Error).message}`);
    child.kill();
    return;
  }
  for (const tool of tools) {
    pi.registerTool({
      name: `loopx_${tool.name}`,
      label: `LoopX ${tool.name}`,
      description: tool.description ?? tool.name,
      parameters: Type.Unsafe<any>(tool.inputSchema ?? { type: "object" }),
      async execute(_id: string, params: any) {
        const res = await request("tools/call", { name: tool.name, arguments: params ?? {} });
        const text = (res.content ?? []).filter((c: any) => c.type === "text").map((c: any) => c.text).join("\n");
        if (res.isError) throw new Error(text || `${tool.name} failed`);
        return { content: [{ type: "text", text }], details: res.structuredContent ?? {} };
      },
    });
  }
}
