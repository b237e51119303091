// node-opcua 2.160.0 server of make bench-opcua (bench/README.md).
//
//   node server.js --port N --items N [--interval-ms MS] [--pki DIR]
//
// It serves, in namespace "urn:qubiq:bench", --items Double variables
// s=V00000, s=V00001, ... (writable, minimumSamplingInterval 0). On the
// command "run TICKS [MS]" it sets every variable to a new value (the tick
// number) every MS (default --interval-ms), TICKS times, each with the
// source timestamp of its tick, then stops. A tick that starts late is
// counted in the lag figures (the server not keeping up).
//
// The server-side counter: every DataChangeNotification the server puts
// into a Publish response is counted (Subscription._updateCounters, the
// same place node-opcua counts subscriptionDiagnostics
// .dataChangeNotificationsCount), over every session, so a client's
// delivered fraction is measured against what the server really sent.
//
// When listening it prints "READY {json}"; then it reads commands from
// stdin, one per line, answering each with one line "R {json}":
//   stats        notifications sent, changes made, ticks, tick lag, sessions
//   run TICKS [MS]  start ticking (answers at once; stats.running says when done)
"use strict";

const path = require("path");
const {
    OPCUAServer,
    OPCUACertificateManager,
    Variant,
    DataType,
    StatusCodes,
    nodesets
} = require("node-opcua");
const { Subscription } = require("node-opcua-server");

function parseArgs(argv) {
    const out = {};
    for (let i = 2; i < argv.length; i++) {
        const a = argv[i];
        if (!a.startsWith("--")) continue;
        const next = argv[i + 1];
        if (next === undefined || next.startsWith("--")) {
            out[a.slice(2)] = true;
        } else {
            out[a.slice(2)] = next;
            i++;
        }
    }
    return out;
}

const args = parseArgs(process.argv);
const port = parseInt(args.port, 10);
const nItems = parseInt(args.items || "5000", 10);
const intervalMs = parseInt(args["interval-ms"] || "100", 10);
const pkiRoot = path.resolve(args.pki || path.join(process.cwd(), "pki-bench"));

// The server-side counter of notifications sent.
let notifications = 0;
const origUpdate = Subscription.prototype._updateCounters;
Subscription.prototype._updateCounters = function (notificationMessage) {
    for (const nd of notificationMessage.notificationData || []) {
        if (nd && nd.monitoredItems) notifications += nd.monitoredItems.length;
    }
    return origUpdate.call(this, notificationMessage);
};

async function main() {
    const serverCertificateManager = new OPCUACertificateManager({ rootFolder: pkiRoot, automaticallyAcceptUnknownCertificate: true });
    await serverCertificateManager.initialize();
    const userCertificateManager = new OPCUACertificateManager({ rootFolder: path.join(pkiRoot, "user"), automaticallyAcceptUnknownCertificate: true });
    await userCertificateManager.initialize();
    const server = new OPCUAServer({
        port,
        hostname: "127.0.0.1",
        alternateHostname: ["127.0.0.1"],
        resourcePath: "",
        serverCertificateManager,
        userCertificateManager,
        allowAnonymous: true,
        nodeset_filename: [nodesets.standard],
        serverCapabilities: {
            maxSessions: 40,
            maxSubscriptionsPerSession: 20,
            maxMonitoredItemsPerSubscription: 100000,
            maxMonitoredItems: 200000,
            operationLimits: { maxMonitoredItemsPerCall: 100000, maxNodesPerRead: 100000 }
        },
        serverInfo: { applicationUri: "urn:qubiq:bench:server", productUri: "urn:qubiq:bench", applicationName: { text: "QUBIQ bench server", locale: "en" } }
    });
    await server.initialize();
    const addressSpace = server.engine.addressSpace;
    const ns = addressSpace.registerNamespace("urn:qubiq:bench");
    const folder = ns.addFolder(addressSpace.rootFolder.objects, { browseName: "Bench", nodeId: "s=Bench" });
    const nodes = [];
    for (let i = 0; i < nItems; i++) {
        const name = "V" + String(i).padStart(5, "0");
        nodes.push(ns.addVariable({
            organizedBy: folder,
            browseName: name,
            nodeId: "s=" + name,
            dataType: DataType.Double,
            accessLevel: "CurrentRead | CurrentWrite",
            userAccessLevel: "CurrentRead | CurrentWrite",
            minimumSamplingInterval: 0,
            value: new Variant({ dataType: DataType.Double, value: 0 })
        }));
    }
    await server.start();

    let changes = 0;
    let ticks = 0;
    let running = false;
    let lags = [];
    let tickMs = [];
    const runTicks = (n, intervalMs) => {
        running = true;
        lags = [];
        tickMs = [];
        const t0 = Date.now() + intervalMs;
        let k = 0;
        const step = () => {
            const now = Date.now();
            lags.push(now - (t0 + k * intervalMs));
            ticks++;
            const src = new Date();
            const v = new Variant({ dataType: DataType.Double, value: ticks });
            for (const node of nodes) {
                node.setValueFromSource(v, StatusCodes.Good, src);
            }
            changes += nodes.length;
            tickMs.push(Date.now() - now);
            k++;
            if (k >= n) {
                running = false;
                return;
            }
            setTimeout(step, Math.max(0, t0 + k * intervalMs - Date.now()));
        };
        setTimeout(step, Math.max(0, t0 - Date.now()));
    };
    const pct = (a, p) => {
        if (a.length === 0) return 0;
        const s = a.slice().sort((x, y) => x - y);
        return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
    };

    const cu = server.engine;
    process.stdout.write("READY " + JSON.stringify({ port, namespaces: addressSpace.getNamespaceArray().map((n) => n.namespaceUri), items: nItems, interval_ms: intervalMs }) + "\n");
    const reply = (o) => process.stdout.write("R " + JSON.stringify(o) + "\n");
    const handle = (line) => {
        const [cmd, arg, arg2] = line.split(" ");
        switch (cmd) {
            case "stats": {
                let items = 0;
                for (const s of Object.values(cu._sessions || {})) items += s.currentMonitoredItemCount;
                reply({ notifications, changes, ticks, running, sessions: cu.currentSessionCount, monitored_items: items,
                    lag_p50_ms: pct(lags, 50), lag_p99_ms: pct(lags, 99), lag_max_ms: pct(lags, 100),
                    tick_p50_ms: pct(tickMs, 50), tick_max_ms: pct(tickMs, 100) });
                return;
            }
            case "run":
                if (running) {
                    reply({ error: "already running" });
                    return;
                }
                runTicks(parseInt(arg, 10), parseInt(arg2 || String(intervalMs), 10));
                reply({ ok: true });
                return;
            default:
                reply({ error: "unknown command " + cmd });
        }
    };
    let buf = "";
    process.stdin.setEncoding("utf8");
    process.stdin.on("data", (d) => {
        buf += d;
        let i;
        while ((i = buf.indexOf("\n")) >= 0) {
            const line = buf.slice(0, i).trim();
            buf = buf.slice(i + 1);
            if (line) handle(line);
        }
    });
    process.stdin.on("end", () => process.exit(0));
    const stop = () => server.shutdown(0).then(() => process.exit(0), () => process.exit(1));
    process.on("SIGTERM", stop);
    process.on("SIGINT", stop);
}

main().catch((err) => {
    console.error("server.js: " + (err && err.stack ? err.stack : err));
    process.exit(1);
});
