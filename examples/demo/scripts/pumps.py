"""Demo gateway scripts for the simulator pump."""


@gateway(timeout_ms=2000)
def set_speed(args):
    qv = system.tag.read(["Line1/Pump/Speed"])[0]
    status = system.tag.write(["Line1/Pump/Setpoint"], [args["rpm"]])[0]
    return {"speed_now": qv.value, "speed_quality": qv.quality, "written": status == "Good"}


def start(args):
    status = system.tag.write(["Line1/Pump/Running"], [True])[0]
    # "message" is what the panel shows when the button's script returns.
    return {"written": status == "Good", "message": "Pump started" if status == "Good" else "Pump not started: " + status}


def stop(args):
    status = system.tag.write(["Line1/Pump/Running"], [False])[0]
    return {"written": status == "Good", "message": "Pump stopped" if status == "Good" else "Pump not stopped: " + status}
