"""A Modbus TCP server for QUBIQ Edge integration tests, built on Debian's
python3-pymodbus (a third-party implementation: nothing of ours runs here).

Usage: /usr/bin/python3 modbus_server.py CONFIG.json
CONFIG: {"port": N, "units": {"1": {"hr": {"100": 16712}, "ir": {}, "co": {},
         "di": {}, "size": 20000}}}
Addresses are zero-based PDU addresses (zero_mode=True). Prints "READY <port>"
on stdout once the listener is bound.

Optional keys (absent: the plain Modbus TCP server above):
  "framer": "rtu"   RTU frames (CRC, no MBAP header) on the TCP socket, as a
                    serial-to-Ethernet gateway carries them (ModbusRtuFramer).
  unit "sparse": true  only the addresses listed exist (ModbusSparseDataBlock):
                    any read or write touching another one is answered with
                    exception 2, so a block can have a hole in the middle.
"""
import asyncio
import json
import sys

from pymodbus.datastore import (ModbusSequentialDataBlock, ModbusServerContext,
                                ModbusSlaveContext, ModbusSparseDataBlock)
from pymodbus.framer.rtu_framer import ModbusRtuFramer
from pymodbus.framer.socket_framer import ModbusSocketFramer
from pymodbus.server.async_io import ModbusTcpServer


def block(spec, size, sparse=False):
    if sparse:
        return ModbusSparseDataBlock({int(a): int(v) for a, v in (spec or {}).items()})
    data = [0] * size
    for addr, val in (spec or {}).items():
        data[int(addr)] = int(val)
    return ModbusSequentialDataBlock(0, data)


async def main():
    with open(sys.argv[1]) as f:
        cfg = json.load(f)
    slaves = {}
    for unit, spec in cfg["units"].items():
        size = int(spec.get("size", 20000))
        sparse = bool(spec.get("sparse", False))
        slaves[int(unit)] = ModbusSlaveContext(
            hr=block(spec.get("hr"), size, sparse), ir=block(spec.get("ir"), size, sparse),
            co=block(spec.get("co"), size, sparse), di=block(spec.get("di"), size, sparse),
            zero_mode=True)
    context = ModbusServerContext(slaves=slaves, single=False)
    framer = ModbusRtuFramer if cfg.get("framer") == "rtu" else ModbusSocketFramer
    server = ModbusTcpServer(context, framer=framer, address=("127.0.0.1", int(cfg["port"])),
                             allow_reuse_address=True)
    task = asyncio.ensure_future(server.serve_forever())
    await server.serving
    print("READY", server.server.sockets[0].getsockname()[1], flush=True)
    await task


if __name__ == "__main__":
    asyncio.run(main())
