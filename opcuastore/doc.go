// Package opcuastore keeps what the appliance stores for its OPC UA
// devices beyond the project file: the addresses converted from the ns=
// to the nsu= form at a device's first connection (Addresses, persisted in
// the store so a server that re-orders its namespaces cannot move a tag to
// another node), and the devices' certificate stores (Certs: pki/own,
// trusted, rejected; trust decisions take effect without a restart). It
// also completes an OPC UA device's config with the data dir's pki
// directory (Defaults).
//
// It is the glue between the service layer, which defines the interfaces
// it needs (service.AddressBook, service.CertStores), and the OPC UA
// driver: only the daemon imports it and passes it to gateway/service, so
// the service layer never links a concrete driver. It imports device,
// device/opcua, tagengine, store and gateway.
package opcuastore
