// node-opcua test peer for the device/opcua integration tests.
//
//   node server.js --port N [--pki DIR] [--cert PEM --key PEM] [--extra-ns-first]
//                  [--without A,B] [--users u:p,...] [--no-anonymous]
//                  [--max-sessions N] [--counter-ms N]
//                  [--policies None,Basic256Sha256,...] [--modes None,Sign,SignAndEncrypt]
//                  [--unsecure-password] [--max-subscriptions N] [--max-items N]
//
// It serves, in namespace "urn:vendor:plc", one writable variable per OPC UA
// built-in type (string node ids named after the type: s=Int32, s=Guid, ...),
// arrays, a read-only variable, a Counter that increments every --counter-ms,
// and Line1.Speed, which also exists in namespace "urn:other" with another
// value. --unsecure-password makes the None endpoint offer only a UserName
// token without a security policy (the password would travel in clear).
// --extra-ns-first registers "urn:other" before "urn:vendor:plc", so
// the namespace indexes swap (docs/opcua.md, fault C14).
//
// When listening it prints one line "READY {json}" with the port, the
// namespace array and the SHA-1 thumbprint of its certificate. It then reads
// commands from stdin, one per line, and answers each with one line
// "R {json}":
//   stats                  sessions, subscriptions, monitored items, counters
//   delete NAME            delete the variable NAME (vendor namespace)
//   set NAME JSON          set NAME's value
//   get NAME               NAME's value as JSON (64-bit integers as strings)
//   drop-items NAME        delete the monitored items on NAME (server side)
//   kill-sessions          close every session on the server side
"use strict";

const fs = require("fs");
const path = require("path");
const crypto = require("crypto");
const {
    OPCUAServer,
    OPCUACertificateManager,
    Variant,
    DataType,
    VariantArrayType,
    StatusCodes,
    SecurityPolicy,
    MessageSecurityMode,
    resolveNodeId,
    coerceLocalizedText,
    coerceQualifiedName,
    UserTokenPolicy,
    UserTokenType,
    nodesets
} = require("node-opcua");

function parseArgs(argv) {
    const out = { flags: {} };
    for (let i = 2; i < argv.length; i++) {
        const a = argv[i];
        if (!a.startsWith("--")) continue;
        const key = a.slice(2);
        const next = argv[i + 1];
        if (next === undefined || next.startsWith("--")) {
            out.flags[key] = true;
        } else {
            out.flags[key] = next;
            i++;
        }
    }
    return out.flags;
}

const args = parseArgs(process.argv);
const port = parseInt(args.port, 10);
if (!port) {
    console.error("server.js: --port is required");
    process.exit(2);
}
const pkiRoot = path.resolve(args.pki || path.join(process.cwd(), "pki"));
const without = new Set(args.without ? String(args.without).split(",") : []);
const counterMs = parseInt(args["counter-ms"] || "100", 10);

const policyNames = String(args.policies || "None,Basic256Sha256,Aes128_Sha256_RsaOaep,Aes256_Sha256_RsaPss").split(",");
const modeNames = String(args.modes || "None,Sign,SignAndEncrypt").split(",");
const users = {};
if (args.users) {
    for (const up of String(args.users).split(",")) {
        const i = up.indexOf(":");
        users[up.slice(0, i)] = up.slice(i + 1);
    }
}

// Variables of the vendor namespace: name, data type, initial value, options.
const i64 = (s) => s; // node-opcua coerces decimal strings for Int64/UInt64
const variables = [
    ["Bool", DataType.Boolean, true],
    ["SByte", DataType.SByte, -5],
    ["Byte", DataType.Byte, 200],
    ["Int16", DataType.Int16, -1234],
    ["UInt16", DataType.UInt16, 60000],
    ["Int32", DataType.Int32, -123456],
    ["UInt32", DataType.UInt32, 4000000000],
    ["Int64", DataType.Int64, i64("-9007199254740993")],
    ["UInt64", DataType.UInt64, i64("18446744073709551615")],
    ["Float", DataType.Float, 3.5],
    ["Double", DataType.Double, 2.718281828459045],
    ["String", DataType.String, "h\u00e9llo"],
    ["DateTime", DataType.DateTime, new Date("2024-05-06T07:08:09.123Z")],
    ["Guid", DataType.Guid, "72962B91-FA75-4AE6-8D28-B404DC7DAF63"],
    ["ByteString", DataType.ByteString, Buffer.from([0, 1, 2, 255])],
    ["LocalizedText", DataType.LocalizedText, coerceLocalizedText({ text: "Pumpe", locale: "de" })],
    ["XmlElement", DataType.XmlElement, "<a>1</a>"],
    ["NodeId", DataType.NodeId, resolveNodeId("ns=1;i=42")],
    ["QualifiedName", DataType.QualifiedName, coerceQualifiedName({ namespaceIndex: 1, name: "Q" })],
    ["StatusCode", DataType.StatusCode, StatusCodes.BadOutOfRange],
    ["UtcTime", DataType.DateTime, new Date("2023-01-02T03:04:05Z"), { dataTypeNode: "i=294" }],
    ["Duration", DataType.Double, 1500, { dataTypeNode: "i=290" }],
    ["Enum", DataType.Int32, 0, { dataTypeNode: "i=852" }],
    ["Int32Array", DataType.Int32, [1, 2, 3], { array: true }],
    ["DoubleArray", DataType.Double, [1.5, -2.25], { array: true }],
    ["StringArray", DataType.String, ["a", "b"], { array: true }],
    ["BoolArray", DataType.Boolean, [true, false], { array: true }],
    ["ByteArray", DataType.Byte, [1, 2, 3], { array: true }],
    ["ReadOnly", DataType.Double, 1.25, { readOnly: true }],
    ["Counter", DataType.UInt32, 0],
    ["Temp", DataType.Double, 21.5],
    ["A", DataType.Double, 1],
    ["B", DataType.Double, 2],
    ["Deletable", DataType.Double, 7],
    ["Line1.Speed", DataType.Double, 42.5]
];

function makeVariant(dataType, value, isArray) {
    if (isArray) {
        return new Variant({ dataType, arrayType: VariantArrayType.Array, value });
    }
    return new Variant({ dataType, value });
}

function toJSON(v) {
    if (v === null || v === undefined) return null;
    if (v instanceof Date) return v.toISOString();
    if (Buffer.isBuffer(v)) return v.toString("base64");
    if (ArrayBuffer.isView(v)) return Array.from(v);
    if (Array.isArray(v)) return v.map(toJSON);
    if (typeof v === "object" && typeof v.toString === "function" && v.constructor && v.constructor.name !== "Object") {
        if (v.constructor.name === "LocalizedText") return v.text;
        if (v.constructor.name === "StatusCode" || v.constructor.name === "ConstantStatusCode") return v.value;
        return v.toString();
    }
    return v;
}

function variantJSON(variant) {
    const dt = variant.dataType;
    const conv = (x) => {
        if ((dt === DataType.Int64 || dt === DataType.UInt64) && Array.isArray(x)) {
            const big = (BigInt(x[0] >>> 0) << 32n) + BigInt(x[1] >>> 0);
            if (dt === DataType.Int64) return BigInt.asIntN(64, big).toString();
            return big.toString();
        }
        return toJSON(x);
    };
    if (variant.arrayType === VariantArrayType.Array) {
        return Array.from(variant.value || []).map(conv);
    }
    return conv(variant.value);
}

function thumbprintOf(chainDer) {
    // the leaf: the first DER SEQUENCE of the chain
    const b = chainDer;
    let len = b[1];
    let off = 2;
    if (len & 0x80) {
        const n = len & 0x7f;
        len = 0;
        for (let i = 0; i < n; i++) len = len * 256 + b[2 + i];
        off = 2 + n;
    }
    return crypto.createHash("sha1").update(b.subarray(0, off + len)).digest("hex");
}

// removeStaleLocks drops the lock folders (proper-lockfile's "<file>.lock")
// that a server killed with SIGKILL leaves behind: node-opcua would wait
// two minutes for them to go stale.
function removeStaleLocks(dir) {
    let entries;
    try {
        entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch (err) {
        return;
    }
    for (const e of entries) {
        const p = path.join(dir, e.name);
        if (e.isDirectory() && e.name.endsWith(".lock")) {
            fs.rmSync(p, { recursive: true, force: true });
        } else if (e.isDirectory()) {
            removeStaleLocks(p);
        }
    }
}

async function main() {
    removeStaleLocks(pkiRoot);
    const serverCertificateManager = new OPCUACertificateManager({
        rootFolder: pkiRoot,
        automaticallyAcceptUnknownCertificate: true
    });
    await serverCertificateManager.initialize();
    // Not the per-user default (~/.config/node-opcua-default-nodejs/UserPKI),
    // which every test server would share, with its lock.
    const userCertificateManager = new OPCUACertificateManager({
        rootFolder: path.join(pkiRoot, "user"),
        automaticallyAcceptUnknownCertificate: true
    });
    await userCertificateManager.initialize();

    const opts = {
        port,
        hostname: "127.0.0.1",
        alternateHostname: ["127.0.0.1"],
        resourcePath: "",
        serverCertificateManager,
        userCertificateManager,
        allowAnonymous: !args["no-anonymous"],
        securityPolicies: policyNames.map((p) => SecurityPolicy[p]),
        securityModes: modeNames.map((m) => MessageSecurityMode[m]),
        serverCapabilities: {
            maxSessions: parseInt(args["max-sessions"] || "20", 10),
            maxSubscriptionsPerSession: parseInt(args["max-subscriptions"] || "10", 10),
            maxMonitoredItemsPerSubscription: parseInt(args["max-items"] || "100000", 10)
        },
        serverInfo: { applicationUri: "urn:qubiq:test:server", productUri: "urn:qubiq:test", applicationName: { text: "QUBIQ test server", locale: "en" } },
        nodeset_filename: [nodesets.standard],
        userManager: {
            isValidUser: (user, pass) => Object.prototype.hasOwnProperty.call(users, user) && users[user] === pass
        }
    };
    if (args.cert) {
        opts.certificateFile = path.resolve(args.cert);
        opts.privateKeyFile = path.resolve(args.key);
    }
    const server = new OPCUAServer(opts);

    // closedSessions counts closes by reason ("CloseSession", "Timeout",
    // "Terminated", "Forcing"); closedDeletingSubscriptions those that
    // deleted the subscriptions.
    const counters = { createdSessions: 0, activatedSessions: 0, closedSessions: {}, closedDeletingSubscriptions: 0 };
    server.on("create_session", (session) => {
        counters.createdSessions++;
        session.on("session_closed", (s, deleteSubscriptions, reason) => {
            counters.closedSessions[reason] = (counters.closedSessions[reason] || 0) + 1;
            if (deleteSubscriptions) counters.closedDeletingSubscriptions++;
        });
    });
    server.on("session_activated", () => counters.activatedSessions++);

    await server.initialize();
    const addressSpace = server.engine.addressSpace;
    let vendor;
    let other;
    if (args["extra-ns-first"]) {
        other = addressSpace.registerNamespace("urn:other");
        vendor = addressSpace.registerNamespace("urn:vendor:plc");
    } else {
        vendor = addressSpace.registerNamespace("urn:vendor:plc");
        other = addressSpace.registerNamespace("urn:other");
    }
    const folder = vendor.addFolder(addressSpace.rootFolder.objects, { browseName: "Plc", nodeId: "s=Plc" });
    const nodes = {};
    for (const [name, dataType, value, o] of variables) {
        const vo = o || {};
        if (without.has(name)) continue;
        const access = vo.readOnly ? "CurrentRead" : "CurrentRead | CurrentWrite";
        const node = vendor.addVariable({
            organizedBy: folder,
            browseName: name,
            nodeId: "s=" + name,
            dataType: vo.dataTypeNode ? resolveNodeId(vo.dataTypeNode) : dataType,
            valueRank: vo.array ? 1 : -1,
            arrayDimensions: vo.array ? [0] : undefined,
            accessLevel: access,
            userAccessLevel: access,
            minimumSamplingInterval: 0,
            value: makeVariant(dataType, value, vo.array)
        });
        node.__dataType = dataType;
        node.__array = !!vo.array;
        nodes[name] = node;
    }
    other.addVariable({
        organizedBy: addressSpace.rootFolder.objects,
        browseName: "Line1.Speed",
        nodeId: "s=Line1.Speed",
        dataType: DataType.Double,
        value: new Variant({ dataType: DataType.Double, value: -1 })
    });

    let counter = 0;
    setInterval(() => {
        counter++;
        const n = nodes["Counter"];
        if (n && !n.__deleted) {
            n.setValueFromSource(new Variant({ dataType: DataType.UInt32, value: counter }), StatusCodes.Good, new Date());
        }
    }, counterMs);

    if (args["unsecure-password"]) {
        for (const ep of server.endpoints) {
            for (const desc of ep.endpointDescriptions()) {
                if (desc.securityMode === MessageSecurityMode.None) {
                    desc.userIdentityTokens = [
                        new UserTokenPolicy({ policyId: "username_unsecure", tokenType: UserTokenType.UserName, securityPolicyUri: null })
                    ];
                }
            }
        }
    }
    await server.start();

    const chain = server.getCertificateChain();
    const ready = {
        port,
        namespaces: addressSpace.getNamespaceArray().map((n) => n.namespaceUri),
        thumbprint: thumbprintOf(chain)
    };
    process.stdout.write("READY " + JSON.stringify(ready) + "\n");

    const reply = (o) => process.stdout.write("R " + JSON.stringify(o) + "\n");
    const handle = (line) => {
        const sp = line.indexOf(" ");
        const cmd = sp < 0 ? line : line.slice(0, sp);
        const rest = sp < 0 ? "" : line.slice(sp + 1);
        try {
            switch (cmd) {
                case "stats": {
                    let monitoredItems = 0;
                    let subscriptions = 0;
                    for (const s of Object.values(server.engine._sessions || {})) {
                        monitoredItems += s.currentMonitoredItemCount;
                        subscriptions += s.currentSubscriptionCount;
                    }
                    reply({
                        sessions: server.engine.currentSessionCount,
                        subscriptions,
                        monitoredItems,
                        createdSessions: counters.createdSessions,
                        activatedSessions: counters.activatedSessions,
                        closedSessions: counters.closedSessions,
                        closedDeletingSubscriptions: counters.closedDeletingSubscriptions,
                        rejectedSessions: server.rejectedSessionCount
                    });
                    return;
                }
                case "delete": {
                    const n = nodes[rest];
                    if (!n) throw new Error("no variable " + rest);
                    n.__deleted = true;
                    addressSpace.deleteNode(n);
                    delete nodes[rest];
                    reply({ ok: true });
                    return;
                }
                case "set": {
                    const sp2 = rest.indexOf(" ");
                    const name = rest.slice(0, sp2);
                    const n = nodes[name];
                    if (!n) throw new Error("no variable " + name);
                    const v = JSON.parse(rest.slice(sp2 + 1));
                    n.setValueFromSource(makeVariant(n.__dataType, v, n.__array), StatusCodes.Good, new Date());
                    reply({ ok: true });
                    return;
                }
                case "get": {
                    const n = nodes[rest];
                    if (!n) throw new Error("no variable " + rest);
                    const dv = n.readValue();
                    reply({ value: variantJSON(dv.value), status: dv.statusCode.name });
                    return;
                }
                case "drop-items": {
                    // delete, behind the client's back, the monitored items
                    // on variable NAME in every subscription
                    let dropped = 0;
                    const target = resolveNodeId("ns=" + vendor.index + ";s=" + rest).toString();
                    for (const sess of Object.values(server.engine._sessions || {})) {
                        const pe = sess.publishEngine;
                        if (!pe) continue;
                        for (const sub of pe.subscriptions) {
                            for (const [id, mi] of Object.entries(sub.monitoredItems || {})) {
                                if (mi.itemToMonitor && mi.itemToMonitor.nodeId && mi.itemToMonitor.nodeId.toString() === target) {
                                    sub.removeMonitoredItem(parseInt(id, 10));
                                    dropped++;
                                }
                            }
                        }
                    }
                    reply({ dropped });
                    return;
                }
                case "kill-sessions": {
                    let closed = 0;
                    for (const s of Object.values(server.engine._sessions || {})) {
                        server.engine.closeSession(s.authenticationToken, true, "Forcing");
                        closed++;
                    }
                    reply({ closed });
                    return;
                }
                default:
                    throw new Error("unknown command " + cmd);
            }
        } catch (err) {
            reply({ error: String(err && err.message ? err.message : err) });
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
    // the test harness closing stdin (or dying) ends the server
    process.stdin.on("end", () => process.exit(0));
    const stop = () => server.shutdown(0).then(() => process.exit(0), () => process.exit(1));
    process.on("SIGTERM", stop);
    process.on("SIGINT", stop);
}

main().catch((err) => {
    console.error("server.js: " + (err && err.stack ? err.stack : err));
    process.exit(1);
});
