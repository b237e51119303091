"""A pymodbus TCP server that stamps every holding register write (for
bench-flows: trigger-to-device-write latency). Debian's python3-pymodbus,
run with /usr/bin/python3; nothing of ours runs here.

Usage: /usr/bin/python3 stamp_server.py PORT
Prints "READY <port>" once listening, then one line per write of holding
registers: "WRITE <unix time ns> <address> <value> ...", flushed at once.
"""
import asyncio
import sys
import time

from pymodbus.datastore import ModbusSequentialDataBlock, ModbusServerContext, ModbusSlaveContext
from pymodbus.server.async_io import ModbusTcpServer


class Stamped(ModbusSequentialDataBlock):
    def setValues(self, address, values):  # noqa: N802 - pymodbus's name
        now = time.time_ns()
        super().setValues(address, values)
        vals = values if isinstance(values, list) else [values]
        sys.stdout.write("WRITE %d %d %s\n" % (now, address, " ".join(str(v) for v in vals)))
        sys.stdout.flush()


async def main():
    port = int(sys.argv[1])
    size = 100
    unit = ModbusSlaveContext(hr=Stamped(0, [0] * size), ir=ModbusSequentialDataBlock(0, [0] * size),
                              co=ModbusSequentialDataBlock(0, [0] * size), di=ModbusSequentialDataBlock(0, [0] * size),
                              zero_mode=True)
    context = ModbusServerContext(slaves={1: unit}, single=False)
    server = ModbusTcpServer(context, address=("127.0.0.1", port), allow_reuse_address=True)
    task = asyncio.ensure_future(server.serve_forever())
    await server.serving
    print("READY", server.server.sockets[0].getsockname()[1], flush=True)
    await task


if __name__ == "__main__":
    asyncio.run(main())
