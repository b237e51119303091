"""Reads registers straight from a Modbus server with pymodbus's own client,
so a test can prove a write reached the device (not just qubiqd).

Usage: /usr/bin/python3 modbus_client.py PORT UNIT ADDRESS COUNT
Prints the holding registers as a JSON list of integers.
"""
import json
import sys

from pymodbus.client import ModbusTcpClient

port, unit, addr, count = (int(a) for a in sys.argv[1:5])
c = ModbusTcpClient("127.0.0.1", port=port, timeout=3)
if not c.connect():
    sys.exit("cannot connect")
r = c.read_holding_registers(addr, count, slave=unit)
c.close()
if r.isError():
    sys.exit(f"error: {r}")
print(json.dumps(r.registers))
